"""A synthetic offline environment: tasks whose second call needs a value only the first call returns.

The quickstart's multi-step chains as executable tasks ("take the train to Paris from Sydney, then get
the forecast for the next stop"): the first call's result names a value (the next stop) that the second
call must copy. With ground-truth history the model only ever sees the right result; here it sees the
result of the call it made, so a wrong first call leads to a wrong second call, and the outcome is
judged on the state reached.

Task (``meta["env"]``, name ``synthetic_chain``):

- ``goal``: the calls that must have been executed, as ``{"name", "arguments"}`` objects (order free,
  each exactly once: a repeated booking is a different state);
- ``results``: ``[[call, result], ...]``: what a known call returns (the chain's first call);
- ``lookups``: ``{tool: {"field": f, "values": [...]}}``: a lookup tool called with other arguments
  returns ``{f: v}`` with ``v`` drawn deterministically from ``values`` (a plausible wrong value);
  any other valid call returns ``{"status": "ok"}``.

State: every call that passed the schema check, in order. Success: the state equals the goal as a
multiset, compared as `tooltune.matching` compares calls (`call_differences`: typed values, argument
order free); calls that were refused (unknown tool, wrong argument names/types/enum values) change
nothing. Score: 1.0 on success, else 0.0.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tooltune.environments.base import (
    Environment,
    Outcome,
    TaskError,
    ToolResult,
    call_text,
    check_arguments,
    error_result,
    ok_result,
    register_environment,
    spec_by_name,
)
from tooltune.matching import call_differences
from tooltune.schema import Sample, SchemaError, ToolCall, calls_from_any


class ChainEnvironment(Environment):
    """The synthetic chain tasks (see the module docstring)."""

    name = "synthetic_chain"

    def _load(self, task: Sample, spec: dict[str, Any]) -> None:
        try:
            self.goal = calls_from_any(spec.get("goal"))
            self.results = {call_text(calls_from_any([c])[0]): r for c, r in spec.get("results") or []}
        except (SchemaError, TypeError, ValueError) as e:
            raise TaskError(f"sample {task.id!r}: meta.env.goal/results: {e}") from None
        if not self.goal:
            raise TaskError(f"sample {task.id!r}: meta.env.goal is empty (nothing to reach)")
        lookups = spec.get("lookups") or {}
        if not isinstance(lookups, dict):
            raise TaskError(f"sample {task.id!r}: meta.env.lookups must be an object")
        self.lookups = lookups
        self.by_name = spec_by_name(task.tools)
        self.state: list[ToolCall] = []

    def _execute(self, call: ToolCall) -> ToolResult:
        spec = self.by_name.get(call.name)
        if spec is None:
            return error_result(f"unknown tool {call.name!r:.80}; available: {sorted(self.by_name)}")
        problem = check_arguments(call, spec)
        if problem:
            return error_result(problem)
        self.state.append(call)
        key = call_text(call)
        if key in self.results:
            return ok_result(self.results[key])
        lookup = self.lookups.get(call.name)
        if isinstance(lookup, dict) and lookup.get("values"):
            values = lookup["values"]
            pick = int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(values)
            return ok_result({str(lookup.get("field", "value")): values[pick]})
        return ok_result({"status": "ok"})

    def outcome(self, final_text: str | None = None) -> Outcome:
        missing_calls, extra_calls = call_differences(self.state, self.goal)
        missing = sorted(map(call_text, missing_calls))
        extra = sorted(map(call_text, extra_calls))
        ok = not missing and not extra
        return Outcome(ok, 1.0 if ok else 0.0, {"missing": missing, "extra": extra})


register_environment(ChainEnvironment.name, ChainEnvironment)
