"""ACEBench's simulated phone and travel APIs as an environment, judged on the end state.

The APIs are our re-implementation (`tooltune.environments.acebench_apis`: `BaseApi`, `MessageApi`,
`ReminderApi`, `FoodPlatform`, `Travel`), run in a `Sandbox` per task exactly as the ACEBench agent
evaluation runs them: the classes are instantiated at the first executed call, a method offered by
several instances runs on each, results are JSON for dicts and `str()` otherwise.

Task (``meta["env"]``, name ``acebench``):

- ``involved_classes``: class names of `CLASSES`;
- ``initial_config``: ``{class: scenario}`` (``BaseApi``'s wifi / logged_in apply to every class);
- ``variant``: ``"multi_step"`` (default) or ``"multi_turn"``, passed to every class;
- the goal, one of: ``goal_state``, ACEBench's ground-truth state (``[{class: {attribute: value}}]``,
  as in its ``possible_answer`` files), or ``ground_truth``, the calls that solve the task (a list of
  ``{"name", "arguments"}`` objects, or a list of steps of them), replayed on a fresh sandbox.

The tools offered are the sample's ``tools``. A step runs a call only when its name is an offered tool
that an involved instance has as a public method, and its arguments are plain JSON literals
(`check_literals`) that fit the tool's schema (`check_arguments`); anything else is refused with an
error message and starts nothing. A call that fails inside the API ("Error during execution: ...") or
runs past the step's time budget leaves the sandbox as it was before it. Every method of the simulated
APIs costs time linear in its arguments, which `check_literals` bounds.

Outcome: ACEBench's end-to-end check (`end_to_end`): the state has as many classes as the goal and
every saved attribute equals the goal's (dict attributes: every goal key equal). Score 1.0 on success,
else 0.0. Nothing executed means no state, which fails unless the goal is empty.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
from typing import Any

from tooltune.environments.acebench_apis.sandbox import CLASSES, Sandbox, end_to_end
from tooltune.environments.base import (
    MAX_RESULT_CHARS,
    Environment,
    Outcome,
    TaskError,
    ToolResult,
    check_arguments,
    check_literals,
    error_result,
    register_environment,
    spec_by_name,
)
from tooltune.environments.limits import StepTimeout
from tooltune.schema import Sample, SchemaError, ToolCall, ToolSpec, calls_from_any

logger = logging.getLogger(__name__)

VARIANTS = ("multi_step", "multi_turn")
_FAILED = "Error during execution"


def _goal_calls(value: Any, where: str) -> list[ToolCall]:
    if not isinstance(value, list):
        raise TaskError(f"{where}: expected a list of calls or of steps")
    try:
        if all(isinstance(s, list) for s in value):
            return [c for i, s in enumerate(value) for c in calls_from_any(s, f"{where}[{i}]")]
        return calls_from_any(value, where)
    except SchemaError as e:
        raise TaskError(str(e)) from None


def _failed(text: str) -> bool:
    """An execution error, or an ACEBench result that reports a failed action (``"status": false``)."""
    if text.startswith(_FAILED):
        return True
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("status") is False


def _checkable(spec: ToolSpec) -> ToolSpec:
    """`spec` without required names that are not among its properties: ACEBench's own documents have
    such slips (reserve_flight requires "payment_methods" but declares "payment_method"); the method's
    signature still rejects a call that misses an argument."""
    params = dict(spec.parameters)
    props = params.get("properties") or {}
    params["required"] = [r for r in params.get("required") or [] if r in props]
    return ToolSpec(spec.name, spec.description, params)


class AcebenchEnvironment(Environment):
    """ACEBench's simulated APIs (see the module docstring)."""

    name = "acebench"

    def _load(self, task: Sample, spec: dict[str, Any]) -> None:
        where = f"sample {task.id!r}: meta.env"
        involved = spec.get("involved_classes")
        if (not isinstance(involved, list) or not involved
                or not all(isinstance(c, str) and c in CLASSES for c in involved)):
            raise TaskError(f"{where}.involved_classes must list some of {sorted(CLASSES)}, "
                            f"got {involved!r:.200}")
        config = spec.get("initial_config")
        config = {} if config is None else config
        if not isinstance(config, dict) or not all(isinstance(v, dict) for v in config.values()):
            raise TaskError(f"{where}.initial_config must be an object of per-class objects")
        variant = spec.get("variant") or "multi_step"
        if variant not in VARIANTS:
            raise TaskError(f"{where}.variant must be one of {VARIANTS}, got {variant!r:.80}")
        self.involved, self.config, self.variant = list(involved), copy.deepcopy(config), variant
        if "goal_state" in spec:
            goal = spec["goal_state"]
            if not isinstance(goal, list) or not all(isinstance(g, dict) and len(g) == 1 for g in goal):
                raise TaskError(f"{where}.goal_state must be a list of {{class: attributes}} objects")
            self.goal = copy.deepcopy(goal)
        elif "ground_truth" in spec:
            self.goal = self._replay(_goal_calls(spec["ground_truth"], f"{where}.ground_truth"), where)
        else:
            raise TaskError(f"{where}: give goal_state or ground_truth")
        self.sandbox = Sandbox(self.config, self.involved, self.variant)
        self.offered = {name: _checkable(t) for name, t in spec_by_name(task.tools).items()}

    def _replay(self, calls: list[ToolCall], where: str) -> list[dict[str, Any]]:
        box = Sandbox(self.config, self.involved, self.variant)
        for call in calls:
            text = box.execute(call)
            if text.startswith(_FAILED):
                raise TaskError(f"{where}: ground-truth call {call.name} failed: {text[:200]}")
        return box.state()

    def _execute(self, call: ToolCall) -> ToolResult:
        spec: ToolSpec | None = self.offered.get(call.name)
        if spec is None:
            return error_result(f"function {call.name!r:.80} is not available; "
                                f"available: {', '.join(sorted(self.offered))[:600]}")
        problem = check_literals(call) or check_arguments(call, spec)
        if problem:
            return error_result(problem)
        if not self._has_method(call.name):
            return error_result(f"function {call.name!r} is not a method of {self.involved}")
        before = copy.deepcopy(self.sandbox.instances)
        try:
            text = self.sandbox.execute(call)
        except StepTimeout:  # stopped at the step's budget: the state as it was before the call
            self.sandbox.instances = before
            raise
        if text.startswith(_FAILED):  # the API raised: the state as it was before the call
            self.sandbox.instances = before
        return ToolResult(text[:MAX_RESULT_CHARS], error=_failed(text))

    def _has_method(self, name: str) -> bool:
        """Whether an involved class defines `name` as a public function (checked on the classes, so
        that asking starts nothing)."""
        if name.startswith("_"):
            return False
        return any(inspect.isfunction(getattr(CLASSES[c], name, None)) for c in self.involved)

    def state(self) -> list[dict[str, Any]]:
        """The saved attributes of every instance (empty before the first executed call)."""
        return self.sandbox.state()

    def outcome(self, final_text: str | None = None) -> Outcome:
        why = end_to_end(self.sandbox.state(), self.goal)
        ok = why is None
        return Outcome(ok, 1.0 if ok else 0.0,
                       {"mismatch": why, "calls": self.calls_made, "errors": self.errors})


def entry_task(
    task_id: str,
    question: str,
    tools: list[ToolSpec],
    initial_config: dict[str, Any],
    involved_classes: list[str],
    goal_state: list[dict[str, Any]],
    variant: str = "multi_step",
    answer: list[ToolCall] | None = None,
) -> Sample:
    """An ACEBench agent entry as a task of this environment: its question is the one user message,
    `tools` its function documents as `ToolSpec`, `goal_state` its ground truth, `answer` the first
    step's calls when known."""
    env = {"name": AcebenchEnvironment.name, "involved_classes": list(involved_classes),
           "initial_config": initial_config, "variant": variant, "goal_state": goal_state}
    return Sample(task_id, "acebench", "multi_step", [{"role": "user", "content": question}], tools,
                  list(answer or []), meta={"env": env})


register_environment(AcebenchEnvironment.name, AcebenchEnvironment)
