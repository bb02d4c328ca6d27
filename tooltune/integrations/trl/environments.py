"""tooltune environments as TRL environments: `GRPOTrainer(environment_factory=...)`.

TRL 1.16 builds one instance per rollout from a factory, lists the public methods of its class as the
tools (their schemas from type hints and docstrings, `transformers.utils.get_json_schema`), calls
``reset(**row)`` with the dataset row before generation, runs the model's tool calls on those methods
and, when the class defines ``get_reward()``, takes it as a reward of weight 1 once per rollout. A dict
of factories lets one run mix environments: each row's ``environment`` column names its factory.

`environment_class(name, tools)` generates such a class for a registered tooltune environment: one
method per tool (`tooltune.integrations.signatures`: real signatures and docstrings, names that are not
identifiers mapped), ``reset`` loading the row's task from its ``task`` column (a task line as
`tooltune data tasks` writes it: JSON text of a `Sample` whose ``meta["env"]`` names the environment, or
the same as an object) and ``get_reward`` the environment's outcome score. `environment_factories(tasks)`
gives the dict form (one class per environment name, its tools the union of its tasks' tools) and
`environment_rows(tasks)` the matching dataset rows; `mcp_environment_class(server)` takes the methods
from an MCP server's tool list. For ``mcp`` tasks the two overlap on purpose: `environment_factories`
builds the class from the tools the task lines recorded (no server started; any environment, mixed runs),
`mcp_environment_class` from the server's live list (every tool it offers but `exclude`); either way each
rollout loads its row's task at ``reset`` and calls the server that task names.

The rows are `tooltune.schema.rows`'s (``prompt``, ``task``, ``environment``, ``answer``). A dataset
without a ``task`` column is refused at the first ``reset``, before any update, in one line naming the
columns it has (it could only train at reward 0.0). Past that nothing here raises inside TRL's loop on
a bad row or a bad call: a row whose task does not load leaves the rollout without a task (every call
answers an error message saying why, the reward is 0.0), a call to a tool the row's task does not
offer, or with arguments that do not fit, is the environment's own failed step (`Environment.step`);
each reason is logged.

``get_reward`` judges the state reached without the final answer text, which TRL does not hand to the
environment: a task whose check reads it (an ``mcp`` ``answer`` check) sees an empty answer. For such
tasks build the classes with ``reward="final_answer"`` (no ``get_reward``) and pass `final_answer_reward`
as a reward function: TRL gives reward functions the rollouts' environments, and it judges each with the
text of the rollout's last assistant message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from tooltune.config import Registry
from tooltune.environments import (
    ENVIRONMENTS,
    Environment,
    EnvironmentSettings,
    TaskError,
    environment_of,
    make_environment,
)
from tooltune.environments.base import error_result
from tooltune.environments.mcp import ENVIRONMENT as MCP_ENVIRONMENT
from tooltune.environments.mcp import McpConnection, McpServer, McpSettings
from tooltune.integrations.signatures import PythonTool, python_tools
from tooltune.schema import Sample, ToolCall, ToolSpec
from tooltune.schema.rows import ANSWER, ENVIRONMENT, PROMPT, TASK, calls_column, load_task, missing_columns

logger = logging.getLogger(__name__)

TASK_COLUMN = TASK
"""The dataset column holding a row's task (JSON text of the task sample)."""
ENVIRONMENT_COLUMN = ENVIRONMENT
"""The column TRL's dict form reads to pick a row's environment."""


class TRLEnvironment:
    """The base of the generated classes: a tooltune environment behind TRL's environment protocol.

    Public methods are tools to TRL, so everything that is not a tool is private here."""

    environment_name: ClassVar[str] = ""
    environment_settings: ClassVar[EnvironmentSettings | None] = None
    """The settings each instance's environment is built with (`make_environment`)."""
    tool_methods: ClassVar[dict[str, PythonTool]] = {}
    """Method name -> the tool it calls (with its parameter mapping)."""
    tool_specs: ClassVar[list[ToolSpec]] = []
    """The tools the methods were generated from."""

    def __init__(self) -> None:
        self._environment: Environment = make_environment(self.environment_name, self.environment_settings)
        self._task: Sample | None = None
        self._problem = "reset() was not called"
        self.last_outcome: Any = None

    def reset(self, **row: Any) -> str | None:
        """Load the row's task; a task that does not load is logged and leaves the rollout without one."""
        self._task, self.last_outcome = None, None
        # a dataset without tasks could only train at reward 0.0: refuse it at the first reset
        missing_columns(row, [TASK], "the training dataset", type(self).__name__,
                        "build the rows with tooltune.integrations.trl.environment_rows(tasks)")
        try:
            task = load_task(row.get(TASK_COLUMN))
            if environment_of(task) != self.environment_name:
                raise TaskError(f"sample {task.id!r}: its environment is {environment_of(task)!r}, "
                                f"not {self.environment_name!r}")
            self._environment.reset(task)
        except Exception as e:  # a task that cannot start (bad JSON, a dead server) fails the rollout
            self._problem = f"the row's task did not load: {e}"
            logger.warning("%s: %s", type(self).__name__, self._problem)
            return None
        self._task = task
        return None

    def _outcome_score(self, final_text: str | None) -> float:
        """The environment's outcome score for the state reached (0.0 for a rollout without a task)."""
        if self._task is None:
            return 0.0
        try:
            self.last_outcome = self._environment.outcome(final_text)
        except Exception as e:  # an outcome check failing is a failed episode, never a crashed step
            logger.warning("%s: sample %r: the outcome check failed: %s", type(self).__name__,
                           self._task.id, e)
            return 0.0
        return float(self.last_outcome.score)

    @property
    def calls_made(self) -> int:
        """Calls made on the current task (including refused ones)."""
        return self._environment.calls_made if self._task is not None else 0

    def _call(self, method: str, arguments: dict[str, Any]) -> str:
        if self._task is None:
            return error_result(self._problem).content
        tool = self.tool_methods[method]
        result = self._environment.step(ToolCall(tool.tool, tool.original_arguments(arguments)))
        if result.error:
            logger.info("%s: sample %r: failed step %s: %s", type(self).__name__, self._task.id, tool.tool,
                        result.content[:300])
        return result.content


class RewardingTRLEnvironment(TRLEnvironment):
    """A TRL environment that owns its reward: TRL calls ``get_reward`` once per rollout."""

    def get_reward(self) -> float:
        """The environment's outcome score for the state reached (0.0 for a rollout without a task)."""
        return self._outcome_score(None)


REWARDS: Registry[type[TRLEnvironment]] = Registry("environment reward", key="reward")
"""How a generated class is rewarded (its base class): by its own ``get_reward``, or by
`final_answer_reward`."""
REWARDS.add("get_reward", RewardingTRLEnvironment)
REWARDS.add("final_answer", TRLEnvironment)


def _final_text(completion: Any) -> str:
    """The content of a rollout's last assistant message (TRL's conversational completion)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(completion if isinstance(completion, list) else []):
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def final_answer_reward(completions: Sequence[Any] = (), environments: Sequence[Any] | None = None,
                        **kwargs: Any) -> list[float | None]:
    """TRL reward function: each rollout's environment judged with the rollout's final answer text (None,
    i.e. not applicable, for a rollout whose environment is not a generated tooltune class)."""
    envs = list(environments or [None] * len(completions))
    return [env._outcome_score(_final_text(c)) if isinstance(env, TRLEnvironment) else None
            for c, env in zip(completions, envs)]


def _method(tool: PythonTool) -> Callable[..., str]:
    def call(self: TRLEnvironment, **arguments: Any) -> str:
        return self._call(tool.method, arguments)

    call.__name__ = call.__qualname__ = tool.method
    call.__signature__ = tool.signature  # type: ignore[attr-defined]
    call.__annotations__ = dict(tool.annotations)
    call.__doc__ = tool.doc
    return call


def environment_class(environment: str, tools: Sequence[ToolSpec], class_name: str | None = None,
                      reward: str = "get_reward", settings: EnvironmentSettings | None = None) -> type:
    """A TRL environment class for the registered environment `environment` whose methods are `tools`
    (the first spec of a name wins), rewarded as `reward` says (`REWARDS`); its instances build their
    environment with `settings` (`make_environment`). `UnknownName` (a ValueError naming the closest
    names) when `environment` is not registered or `reward` is unknown."""
    ENVIRONMENTS.get(environment)  # an unknown name refused before TRL probes the class
    base = REWARDS[reward]
    unique = list({t.name: t for t in reversed(list(tools))}.values())[::-1]
    methods = python_tools(unique)
    body: dict[str, Any] = {"environment_name": environment, "environment_settings": settings,
                            "tool_methods": {m.method: m for m in methods},
                            "tool_specs": unique,
                            "__doc__": f"The {environment!r} tooltune environment as a TRL environment."}
    body.update({m.method: _method(m) for m in methods})
    name = class_name or "".join(p.capitalize() for p in _split(environment)) + "Environment"
    return type(name, (base,), body)


def _split(name: str) -> list[str]:
    return [p for p in "".join(c if c.isalnum() else " " for c in name).split() if p]


def _tools_by_environment(tasks: Sequence[Sample]) -> dict[str, list[ToolSpec]]:
    grouped: dict[str, list[ToolSpec]] = {}
    for task in tasks:
        grouped.setdefault(environment_of(task), []).extend(task.tools)
    return grouped


def environment_factories(tasks: Sequence[Sample], reward: str = "get_reward",
                          settings: EnvironmentSettings | None = None) -> dict[str, type]:
    """TRL's dict form for `tasks`: one class per environment name, its methods the union of its tasks'
    tools (a task's own tools are the only ones it accepts), its environments built with `settings`.
    TaskError names a task without one."""
    return {name: environment_class(name, tools, reward=reward, settings=settings)
            for name, tools in _tools_by_environment(tasks).items()}


def environment_rows(tasks: Sequence[Sample]) -> list[dict[str, Any]]:
    """Dataset rows for `tasks`: ``prompt`` (the task's messages), ``task`` (its JSON line),
    ``environment`` (its environment's name, for the dict form) and ``answer`` (the first step's calls as
    JSON, for tooltune's rewards through `tooltune.integrations.trl.reward.TRLRewardFunction`)."""
    return [
        {PROMPT: [dict(m) for m in t.messages], TASK: t.to_json(), ENVIRONMENT: environment_of(t),
         ANSWER: calls_column(t.answer)}
        for t in tasks
    ]


def mcp_environment_class(
    server: Any, settings: McpSettings | None = None, exclude: Sequence[str] = (), reward: str = "get_reward"
) -> type:
    """A TRL environment class of the ``mcp`` environment whose methods are the tools `server` lists (a
    command line, argv list, URL or `McpServer`), but those in `exclude` (a reset tool, say). The server
    is started once to list them (under the start and call deadlines of `settings`). The class's
    environments run under `settings` (default: `McpSettings()`)."""
    s = settings or McpSettings()
    conn = McpConnection(McpServer.parse(server), s.start_seconds, s.call_seconds).start()
    try:
        tools = [t for t in conn.list_tools() if t.name not in set(exclude)]
    finally:
        conn.close()
    return environment_class(MCP_ENVIRONMENT, tools, "McpEnvironment", reward, {MCP_ENVIRONMENT: s})


__all__ = ["ENVIRONMENT_COLUMN", "REWARDS", "TASK_COLUMN", "RewardingTRLEnvironment", "TRLEnvironment",
           "environment_class", "environment_factories", "environment_rows", "final_answer_reward",
           "mcp_environment_class"]
