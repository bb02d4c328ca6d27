"""What an environment is: tools, an initial state, a safe step per parsed call, and an outcome check.

An environment turns a model's decoded calls into tool messages and judges the final state. It owns no
model and no prompt: the episode driver (`tooltune.generation.episodes`) renders the conversation,
generates, decodes the calls with the template's grammar and hands each `ToolCall` to `step`.

Contract (every environment in `tooltune.environments` follows it):

- ``reset(task)`` loads one task: a `Sample` whose ``meta["env"]`` holds the environment's name and its
  task description (initial state, goal). Nothing from an earlier task survives a reset.
- ``tools`` are the specs the model is shown (`ToolSpec`), the same the sample carries.
- ``step(call)`` executes ONE parsed call and returns a `ToolResult` (the tool message text and whether it
  was an error). It never raises on model input: unknown functions, wrong argument names or types and
  anything that is not a plain literal call are answered with an error message and change no state.
  It runs under the environment's time budget (``step_seconds``, `tooltune.environments.limits`): a
  step that runs longer is stopped and answered with an error message saying so.
- ``outcome(final_text)`` judges the episode after the last turn (BFCL multi-turn semantics: the state
  reached must equal the goal state, and required facts must appear in the final answer when the task
  asks for them). It returns an `Outcome` with ``success`` and a score in [0, 1].

Adding an environment: write one module with a subclass of `Environment` and register it with
`register_environment` (see `tooltune.environments.synthetic` for a complete small example). The
registry, `ENVIRONMENTS`, is a `tooltune.config.Registry`. An environment with settings of its own (the
`mcp` environment's `McpSettings`) takes them as its constructor's one argument: whoever builds it
passes them, by environment name, to `make_environment`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tooltune.config import Registry
from tooltune.environments.limits import STEP_SECONDS, StepTimeout, step_budget
from tooltune.matching import call_key
from tooltune.schema import Sample, ToolCall, ToolSpec

MAX_RESULT_CHARS = 2000
"""Tool messages are cut to this many characters (a tool must not flood the context)."""


class TaskError(ValueError):
    """A task that an environment cannot load (names the sample and the field)."""


@dataclass(frozen=True)
class ToolResult:
    """One executed (or refused) call: the tool message text, and whether it was an error."""

    content: str
    error: bool = False


@dataclass(frozen=True)
class Outcome:
    """The judgement of a finished episode."""

    success: bool
    score: float
    details: dict[str, Any] = field(default_factory=dict)


def error_result(message: str) -> ToolResult:
    """The tool message of a refused or failed call (JSON, so models see one shape for every error)."""
    text = json.dumps({"error": message[: MAX_RESULT_CHARS // 2]})  # escaping can double the length
    return ToolResult(text[:MAX_RESULT_CHARS], error=True)


def ok_result(value: Any) -> ToolResult:
    """The tool message of a call that ran: JSON of `value`, cut to `MAX_RESULT_CHARS`."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return ToolResult(text[:MAX_RESULT_CHARS])


class Environment(ABC):
    """One task at a time: `reset`, then `step` per call, then `outcome`."""

    name: ClassVar[str] = ""
    step_seconds: float = STEP_SECONDS
    """Time budget of one step in seconds (0: none); set it on an instance to change it."""
    concurrency: tuple[str, int] | None = None
    """``(key, limit)`` when this environment's steps may run on a worker thread, next to other
    episodes' steps, at most ``limit`` at once per ``key`` (`tooltune.generation.tool_calls`); None:
    on the caller's thread, where the step budget's alarm can interrupt pure Python code."""

    def __init__(self) -> None:
        self.task: Sample | None = None
        self.calls_made = 0
        self.errors = 0
        self.timeouts = 0

    def reset(self, task: Sample) -> None:
        """Load `task` (its ``meta["env"]``); forget everything from the previous task."""
        spec = task.meta.get("env")
        if not isinstance(spec, dict) or spec.get("name") != self.name:
            raise TaskError(
                f"sample {task.id!r}: meta.env must be an object with name {self.name!r}, got {spec!r:.200}"
            )
        self.task = task
        self.calls_made = 0
        self.errors = 0
        self.timeouts = 0
        self._load(task, spec)

    @property
    def tools(self) -> list[ToolSpec]:
        """The tools the model is offered for the current task."""
        if self.task is None:
            return []
        return list(self.task.tools)

    def step(self, call: ToolCall) -> ToolResult:
        """Execute one parsed call within `step_seconds`; never raises on model input."""
        self.calls_made += 1
        try:
            with step_budget(self.step_seconds, f"{call.name!r:.80}"):
                result = self._execute(call)
        except StepTimeout as e:  # the episode goes on: this step failed, saying why
            self.timeouts += 1
            result = error_result(str(e))
        except Exception as e:  # a tool implementation's own failure is the tool's error message
            result = error_result(f"{type(e).__name__}: {e}")
        if result.error:
            self.errors += 1
        return result

    @abstractmethod
    def _load(self, task: Sample, spec: dict[str, Any]) -> None:
        """Set the initial state from the task's ``meta["env"]``; raise TaskError naming the field."""

    @abstractmethod
    def _execute(self, call: ToolCall) -> ToolResult:
        """Run one call against the current state."""

    @abstractmethod
    def outcome(self, final_text: str | None = None) -> Outcome:
        """Judge the state reached (and the final answer text, for tasks that require facts in it)."""


EnvironmentFactory = Callable[..., Environment]
"""Builds a fresh environment: called with no argument, or with the environment's own settings object
(`make_environment`'s ``settings``)."""

EnvironmentSettings = Mapping[str, Any]
"""Settings objects by environment name (``{"mcp": McpSettings(...)}``): what `make_environment` passes
to the factory of that name; an environment without an entry is built with its defaults."""

ENVIRONMENTS: Registry[EnvironmentFactory] = Registry("environment")
"""Every registered environment by name."""


def register_environment(name: str, factory: EnvironmentFactory) -> None:
    """Register `factory` (a class, or a callable taking no argument or the environment's settings)
    under `name`."""
    ENVIRONMENTS.add(name, factory)


def make_environment(name: str, settings: EnvironmentSettings | None = None) -> Environment:
    """A fresh environment registered as `name`, built with ``settings[name]`` when there is one;
    an unknown name is `UnknownName`, which suggests the closest registered names."""
    factory = ENVIRONMENTS[name]
    own = (settings or {}).get(name)
    return factory() if own is None else factory(own)


def environment_of(task: Sample) -> str:
    """The environment name a task asks for (its ``meta["env"]["name"]``), or raise naming the sample."""
    spec = task.meta.get("env")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise TaskError(f"sample {task.id!r}: meta.env.name is missing (not an environment task)")
    return spec["name"]


def call_text(call: ToolCall) -> str:
    """A hashable text of a call: its name followed by its arguments in `tooltune.matching`'s canonical
    form (typed, key order free), for lookups of known results, reports of a state and comparisons of
    call sequences: calls that `tooltune.matching` counts equal have the same text."""
    name, arguments = call_key(call)
    return name + arguments


def check_arguments(call: ToolCall, spec: ToolSpec) -> str | None:
    """Why `call`'s arguments do not fit `spec`'s JSON schema (unknown or missing names, wrong JSON
    types, values outside an enum), or None when they fit. Only the schema's top level is checked."""
    params = spec.parameters if isinstance(spec.parameters, dict) else {}
    props = params.get("properties") or {}
    unknown = sorted(set(call.arguments) - set(props))
    if unknown:
        return f"{call.name}: unknown argument(s) {unknown}; expected some of {sorted(props)}"
    missing = [k for k in params.get("required") or [] if k not in call.arguments]
    if missing:
        return f"{call.name}: missing required argument(s) {missing}"
    kinds = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
             "array": list, "object": dict}
    for k, v in call.arguments.items():
        schema = props.get(k) if isinstance(props.get(k), dict) else {}
        declared = schema.get("type")
        types = [t for t in (declared if isinstance(declared, list) else [declared]) if isinstance(t, str)]
        if v is None and "null" in types:
            continue
        wants = [kinds[t] for t in types if t in kinds]
        fits = [w for w in wants if isinstance(v, w)
                and not (isinstance(v, bool) and w in (int, (int, float)))]  # True is an int in Python
        if wants and not fits:
            return f"{call.name}: argument {k!r} must be {declared}, got {type(v).__name__}"
        if isinstance(schema.get("enum"), list) and v not in schema["enum"]:
            return f"{call.name}: argument {k!r} must be one of {schema['enum']}, got {v!r:.80}"
    return None


MAX_ARGUMENT_CHARS = 20_000
"""Longest JSON text of one call's arguments that `check_literals` lets through."""
MAX_ARGUMENT_DEPTH = 16
"""Deepest nesting of lists and objects in one argument value that `check_literals` lets through."""


def check_literals(call: ToolCall) -> str | None:
    """Why `call`'s arguments are not plain JSON literals an API method may receive, or None.

    Argument names must be identifiers without a leading underscore; values only None, booleans,
    integers, finite floats, strings, lists and objects with string keys, at most `MAX_ARGUMENT_DEPTH`
    deep and `MAX_ARGUMENT_CHARS` of JSON in all. Strings are data: nothing here or after reads them
    as code."""
    for k in call.arguments:
        if type(k) is not str or not k.isidentifier() or k.startswith("_"):
            return f"{call.name}: argument name {k!r:.80} is not a plain identifier"
    stack: list[tuple[Any, int]] = [(v, 1) for v in call.arguments.values()]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_ARGUMENT_DEPTH:
            return f"{call.name}: an argument is nested deeper than {MAX_ARGUMENT_DEPTH} levels"
        kind = type(value)
        if kind is list:
            stack.extend((v, depth + 1) for v in value)
        elif kind is dict:
            if not all(type(k) is str for k in value):
                return f"{call.name}: an object argument has a key that is not a string"
            stack.extend((v, depth + 1) for v in value.values())
        elif value is not None and kind not in (bool, int, float, str):  # exact types: no subclasses
            return f"{call.name}: an argument is a {kind.__name__}, not a JSON literal"
    try:
        size = len(json.dumps(call.arguments, allow_nan=False))
    except (TypeError, ValueError) as e:  # NaN or infinity
        return f"{call.name}: arguments are not plain JSON ({e})"
    if size > MAX_ARGUMENT_CHARS:
        return f"{call.name}: arguments are {size} characters of JSON (at most {MAX_ARGUMENT_CHARS})"
    return None


def spec_by_name(tools: Sequence[ToolSpec]) -> dict[str, ToolSpec]:
    """The offered tools by name."""
    return {t.name: t for t in tools}
