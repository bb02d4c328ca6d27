"""Episodes of tooltune environments driven through verl's tool lifecycle, without importing verl.

verl 0.9.1's agent loop runs every parsed call as ``create`` -> ``execute`` -> ``release`` on a fresh
instance id, so an episode's state cannot live in a tool instance: it lives with the trajectory.
`ToolSessions` keeps it (`tooltune.integrations.verl.tools.EnvironmentTool` is the thin verl class on
top):

- in verl's loop, ``execute`` receives the trajectory's ``agent_data``: its environment is created from
  the task in ``agent_data.tools_kwargs["tooltune"]["create_kwargs"]["task"]`` at its first call and is
  kept, for all of the trajectory's tools, as long as that ``agent_data`` lives (a weak reference);
- driven directly (no ``agent_data``), ``open(instance_id, {"task": ...})`` names an episode's task,
  every call under that instance id shares its environment, `score` judges it and `close` ends it.

After each step of a trajectory the outcome score goes to ``agent_data.extra_fields["tooltune_outcome"]``;
verl's reward loop merges those fields into the reward function's ``extra_info``, where `outcome_score`
(``reward.custom_reward_function``) reads it. The ``mcp`` environment is the exception
(`JUDGED_AT_THE_END`): judging it ends its episode (result checks call the server, which is then
released), so it is judged by `score` (verl's ``calc_reward``) only.

Nothing raises on model input: a task that does not load, arguments that are not an object and a call
the task does not offer are failed steps whose tool message says why (the reason is logged).
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from tooltune.environments import Environment, EnvironmentSettings, environment_of, make_environment
from tooltune.environments.base import ToolResult, error_result
from tooltune.integrations.verl.config import OUTCOME_FIELD, SESSION_KEY
from tooltune.schema import ToolCall
from tooltune.schema.rows import load_task

logger = logging.getLogger(__name__)

JUDGED_AT_THE_END = frozenset({"mcp"})
"""Environments whose outcome check ends the episode: never judged between steps."""


def start_environment(task_value: Any, settings: EnvironmentSettings | None = None) -> Environment | str:
    """A fresh environment on `task_value` (a task's JSON line or object), built with `settings`
    (`make_environment`), or why there is none."""
    try:
        task = load_task(task_value)
        env = make_environment(environment_of(task), settings)
        env.reset(task)
    except Exception as e:  # a task that cannot start (bad JSON, a dead server) fails the episode
        return f"the row's task did not load: {e}"
    return env


def session_task(tools_kwargs: Any) -> Any:
    """The task in a row's ``tools_kwargs`` (None when it holds none)."""
    entry = tools_kwargs.get(SESSION_KEY) if isinstance(tools_kwargs, dict) else None
    create = entry.get("create_kwargs") if isinstance(entry, dict) else None
    return create.get("task") if isinstance(create, dict) else None


def judge(env: Environment) -> float:
    """The outcome score of the state `env` reached (0.0 when the check itself fails)."""
    try:
        return float(env.outcome(None).score)
    except Exception as e:  # a failing outcome check is a failed episode, not a crashed rollout
        logger.warning("environment %r: the outcome check failed: %s", env.name, e)
        return 0.0


class ToolSessions:
    """The environments of running trajectories and directly driven episodes (module docstring), built
    with `settings` (`make_environment`; default: each environment's own defaults)."""

    def __init__(self, settings: EnvironmentSettings | None = None) -> None:
        self.settings = settings
        self._trajectories: weakref.WeakKeyDictionary[Any, Environment | str] = weakref.WeakKeyDictionary()
        self._episodes: dict[str, Environment | str] = {}
        self._tasks: dict[str, Any] = {}

    def open(self, instance_id: str, create_kwargs: Any) -> None:
        """Record the task ``create_kwargs["task"]`` names for `instance_id` (nothing when it names none)."""
        if isinstance(create_kwargs, dict) and create_kwargs.get("task") is not None:
            self._tasks.setdefault(instance_id, create_kwargs["task"])

    def environment(self, instance_id: str, agent_data: Any = None) -> Environment | str:
        """The environment of `agent_data`'s trajectory (or of the episode `instance_id`), started at the
        first call; a string says why there is none."""
        if agent_data is not None:
            try:
                found = self._trajectories.get(agent_data)
            except TypeError:  # an object no weak reference can name: its id keys an episode instead
                key = f"agent_data:{id(agent_data)}"
                if key not in self._episodes:
                    self._episodes[key] = self._start(instance_id, agent_data)
                return self._episodes[key]
            if found is None:
                found = self._trajectories[agent_data] = self._start(instance_id, agent_data)
            return found
        found = self._episodes.get(instance_id)
        if found is None:
            task = self._tasks.get(instance_id)
            found = (start_environment(task, self.settings) if task is not None
                     else f"no task: {instance_id!r} names none")
            self._episodes[instance_id] = found
        return found

    def _start(self, instance_id: str, agent_data: Any) -> Environment | str:
        task = session_task(getattr(agent_data, "tools_kwargs", None))
        task = task if task is not None else self._tasks.get(instance_id)
        if task is None:
            return f"no task: the row's extra_info.tools_kwargs has no {SESSION_KEY!r} entry"
        return start_environment(task, self.settings)

    def call(self, tool: str, instance_id: str, parameters: Any, agent_data: Any = None) -> ToolResult:
        """Run one call of `tool` in its episode; record the outcome on `agent_data` (module docstring)."""
        env = self.environment(instance_id, agent_data)
        if isinstance(env, str):
            logger.warning("tool %r: %s", tool, env)
            return error_result(env)
        if isinstance(parameters, dict):
            result = env.step(ToolCall(tool, parameters))
        else:
            env.calls_made += 1
            result = error_result(f"{tool}: arguments must be an object, got {type(parameters).__name__}")
        if result.error:
            logger.info("tool %r: failed step: %s", tool, result.content[:300])
        extra = getattr(agent_data, "extra_fields", None)
        if isinstance(extra, dict) and env.name not in JUDGED_AT_THE_END:
            extra[OUTCOME_FIELD] = judge(env)
        return result

    def score(self, instance_id: str, agent_data: Any = None) -> float:
        """The outcome score of the episode (0.0 when its task did not load)."""
        env = self.environment(instance_id, agent_data)
        return 0.0 if isinstance(env, str) else judge(env)

    def close(self, instance_id: str) -> None:
        """Forget the episode `instance_id` and release its environment (a trajectory's own lives with
        its ``agent_data``)."""
        self._tasks.pop(instance_id, None)
        env = self._episodes.pop(instance_id, None)
        close = getattr(env, "close", None)
        if callable(close):
            close()


def outcome_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  **kwargs: Any) -> float:
    """verl's reward function for agentic rows: the environment's outcome after the trajectory's last
    step (``extra_info["tooltune_outcome"]``); a trajectory without a step is judged on its task's
    initial state (``mcp`` tasks: 0.0, see the module docstring)."""
    info = extra_info if isinstance(extra_info, dict) else {}
    value = info.get(OUTCOME_FIELD)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    task = session_task(info.get("tools_kwargs"))
    env = start_environment(task) if task is not None else "no task in extra_info.tools_kwargs"
    if isinstance(env, str):
        logger.warning("outcome_score: %s", env)
        return 0.0
    return 0.0 if env.name in JUDGED_AT_THE_END else judge(env)


__all__ = ["JUDGED_AT_THE_END", "ToolSessions", "judge", "outcome_score", "session_task", "start_environment"]
