"""The API-Bank tool manager and the official per-sample judgement.

`ToolManager` mirrors the official `tool_manager.py`: a fresh manager loads every initial database (tools
that share a database share one copy), gives tools that take a token the CheckToken tool as their token
checker, keeps one instance per tool, and converts arguments by their declared type before calling
(`int` / `float` from digit strings, `bool` as `value == 'True'`, anything else as given).

`scoring.judge` applies the official evaluator's treatment of one API sample (`evaluator_by_json.py`): the
request's API name must equal the ground truth's; the request runs on a freshly initialised manager; the
tool's check compares its result with the ground-truth result recorded in the dialogue file. The outcomes
the official loop counts as wrong keep its names (`api_name_mismatch`, `invalid_input_parameter`,
`miss_input_argument`, `key_error`); an error the official loop re-raises (it stops the whole evaluation)
is `official_crash`, and counts as wrong here.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tooltune.evaluation.apibank import (
    tools_account,
    tools_health,
    tools_meeting,
    tools_misc,
    tools_schedule,
    tools_services,
)
from tooltune.evaluation.apibank.tables import DATABASES, LOOKUPS, RECORDED, SPECS
from tooltune.evaluation.apibank.tool import Tool, Unscorable

TOOL_CLASSES: dict[str, type[Tool]] = {
    cls.name: cls
    for module in (tools_account, tools_schedule, tools_meeting, tools_health, tools_misc, tools_services)
    for cls in module.TOOLS
}
_INITIAL = {**DATABASES, **LOOKUPS}
SEED = 0
"""Seed of each manager's random numbers (appointment ids, registration tokens), so that two managers that
run the same calls give the same results."""


class ToolManager:
    """Freshly initialised API-Bank tools: one instance per tool, sharing databases by name."""

    def __init__(self, seed: int = SEED) -> None:
        self.databases = copy.deepcopy(_INITIAL)
        self.rng = random.Random(seed)
        self.tools: dict[str, Tool] = {}
        self.token_checker = self.tool("CheckToken")

    def tool(self, name: str) -> Tool:
        if name not in self.tools:
            cls = TOOL_CLASSES[name]
            checker = None if name == "CheckToken" else getattr(self, "token_checker", None)
            needs_token = "token" in SPECS[name]["input_parameters"]
            self.tools[name] = cls(self.databases.get(cls.database_name or ""),
                                   checker if needs_token else None, self.rng, RECORDED)
        return self.tools[name]

    def api_call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The official `ToolManager.api_call`: validate names, convert by declared type, call."""
        declared = SPECS[name]["input_parameters"]
        processed: dict[str, Any] = {}
        for key, value in arguments.items():
            assert key in declared, f"invalid parameter name. parameter: {key}"
            kind = declared[key]["type"]
            if kind == "int":
                if isinstance(value, str):
                    assert value.isdigit(), f"invalid parameter type. parameter: {value}"
                processed[key] = int(value)
            elif kind == "float":
                if isinstance(value, str):
                    assert value.replace(".", "", 1).isdigit(), "invalid parameter type."
                processed[key] = float(value)
            elif kind in ("str", "list(str)", "list"):
                processed[key] = value
            elif kind == "bool":
                processed[key] = value == "True"
            else:
                raise Exception("invalid parameter type.")
        return self.tool(name).call(**processed)

    def replay(self, calls: Sequence[Sequence[Any]]) -> None:
        """Run earlier (name, arguments) calls for their effect on the databases; their outcome is ignored."""
        for name, arguments in calls:
            if name in TOOL_CLASSES:
                try:
                    self.api_call(name, arguments or {})
                except Exception:
                    pass


@dataclass(frozen=True)
class Outcome:
    """One execution of a request: its result, or the official error category it fell into."""

    result: dict[str, Any] | None
    error: str | None = None


def execute(name: str, arguments: Mapping[str, Any], earlier: Sequence[Sequence[Any]] = ()) -> tuple[
        Outcome, ToolManager]:
    """Run one request on a fresh manager (after `earlier` calls), classifying errors as officially."""
    manager = ToolManager()
    manager.replay(earlier)
    try:
        return Outcome(manager.api_call(name, arguments)), manager
    except Unscorable as e:
        return Outcome(None, f"unscorable_offline: {e}"), manager
    except AssertionError as e:
        if "invalid parameter name" in str(e):
            return Outcome(None, f"invalid_input_parameter: {e}"), manager
        return Outcome(None, f"official_crash: AssertionError: {e}"), manager
    except Exception as e:
        if "missing" in str(e) and "required positional argument" in str(e):
            return Outcome(None, f"miss_input_argument: {e}"), manager
        return Outcome(None, f"official_crash: {type(e).__name__}: {e}"), manager


def check(manager: ToolManager, name: str, response: Mapping[str, Any], truth: Mapping[str, Any]) -> tuple[
        bool, str | None]:
    """The tool's check on copies (official checks pop keys); a KeyError is `key_error`, as officially."""
    try:
        ok = manager.tool(name).check(copy.deepcopy(dict(response)), copy.deepcopy(dict(truth)))
    except Unscorable as e:
        return False, f"unscorable_offline: {e}"
    except KeyError as e:
        return False, f"key_error: {e}"
    except AssertionError as e:
        if "The API name is not correct." in str(e):
            return False, "api_name_mismatch"
        return False, f"official_crash: AssertionError: {e}"
    except Exception as e:
        return False, f"official_crash: {type(e).__name__}: {e}"
    return bool(ok), None if ok else _mismatch(response, truth)


def _mismatch(response: Mapping[str, Any], truth: Mapping[str, Any]) -> str:
    """The official error statistic of a wrong result: exception, else output, else input mismatch."""
    if response.get("exception"):
        return f"has_exception: {response['exception']}"
    if response.get("output") != truth.get("output"):
        return "output_mismatch"
    if response.get("input") != truth.get("input"):
        return "input_mismatch"
    return "check_failed"
