"""The BFCL multi-turn API classes as an environment: file system, messaging, posting, tickets, trading,
travel, vehicle control and math, executed in process and judged with BFCL's multi-turn checker rules.

The classes are `bfcl_eval`'s own (`bfcl_eval.eval_checker.multi_turn_eval.func_source_code.*`),
instantiated directly: one instance per involved class, loaded with a deep copy of the task's
``initial_config[class]`` (`_load_scenario`; MathAPI is stateless and loads nothing), as BFCL's
executor does. Nothing is kept in module globals, so tasks never share an instance.

Task (``meta["env"]``, name ``bfcl``):

- ``involved_classes``: class names (`CLASSES`);
- ``initial_config``: ``{class: scenario}`` as in BFCL's entries;
- ``ground_truth``: the calls that solve the task, a list of steps, each a list of
  ``{"name", "arguments"}`` objects (a flat list of calls is read as one call per step);
- ``required_responses`` (optional): texts the episode must produce (see `BfclEnvironment.outcome`).

The tools offered are the sample's ``tools`` (BFCL's function documents as `ToolSpec`); each must be a
public method of an involved class.

A step (``corrected`` scoring, the training signal) runs a call only when its name is an offered tool and a
public function defined on an involved class (no leading underscore: `_load_scenario`, `__init__` and
attributes are never reachable), its arguments are plain JSON literals (`check_literals`) that fit the
tool's schema (`check_arguments`) and bind to the method's signature. The method gets a deep copy of
the arguments as keyword arguments: no call string is built and nothing is evaluated. A method that
raises leaves the instance as it was before the call (its attributes are restored); BFCL's tool message
for it is kept ("Error during execution: ..."). Results are shown as BFCL's executor shows them (dicts
as JSON, anything else `str()`), cut to `MAX_RESULT_CHARS`.

Bounds (`tooltune.environments.bfcl_limits`): arguments that would make a MathAPI method compute for
minutes (`round_number`'s decimal_places, `logarithm` / `square_root`'s precision, `power`'s base and
exponent) are refused before the call; a call that leaves the GorillaFileSystem's tree deeper than
`MAX_TREE_DEPTH` levels or with more than `MAX_TREE_ENTRIES` paths is refused and the file system put
back; every step runs under the environment's time budget (`tooltune.environments.limits`). The
decimal and mpmath precisions MathAPI sets process-wide are put back after every call.

Scoring (`BfclEnvironment(scoring=...)`): ``official`` (the default of the class, as of every entry point
that reports a benchmark's number) or ``corrected`` (the training signal: what `make_environment("bfcl")`
builds, `corrected_environment`). ``corrected`` applies the rules in `CORRECTED_RULES` where BFCL's
checker is too strict or too loose for a reward; ``official`` gives BFCL's own outcome (for
evaluation): any public method of an involved class runs, with no schema
check and no state restored after a raising method, and the outcome needs the state of the ground truth
and every tool message of the replayed ground truth among the episode's tool messages, each as often
as the ground truth produced it. The literal and resource checks apply in both modes (docs/environments.md).

`bfcl_eval` is optional: it is imported when a task is loaded, not when this module is.
"""

from __future__ import annotations

import copy
import decimal
import importlib
import importlib.util
import inspect
import json
import logging
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from tooltune.config import Registry
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
from tooltune.environments.bfcl_limits import TREE_CLASSES, argument_problem, tree_problem
from tooltune.environments.limits import StepTimeout, shielded
from tooltune.schema import Sample, SchemaError, Scoring, ToolCall, calls_from_any

logger = logging.getLogger(__name__)

_PREFIX = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
CLASSES: Registry[tuple[str, str]] = Registry("BFCL class", key="involved_classes")
"""The multi-turn classes: module under `bfcl_eval`'s func_source_code, and function-document file.
BFCL's web-search and memory classes are left out on purpose (network access, files on disk)."""
for _name, _files in {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}.items():
    CLASSES.add(_name, _files)

STATELESS = ("MathAPI",)
"""Classes BFCL never loads a scenario into."""

CORRECTED_RULES: dict[str, str] = {
    "final_answer_counts": "a required response contained in the final answer text counts as produced "
                           "(BFCL: only tool messages count)",
    "required_once": "each required response needs one equal tool message, however often it is listed "
                     "(BFCL: one per occurrence)",
    "asked_responses_only": "only the task's required_responses are checked (BFCL: every tool message "
                            "of the replayed ground truth)",
    "schema_check": "a call whose arguments do not fit the tool's schema is refused and changes nothing "
                    "(BFCL: runs it; card_verification_number=465.0, budget_limit='2000.0' succeed)",
    "offered_only": "only the task's offered tools run (BFCL: any public method of an involved class)",
    "restore_on_error": "a method that raises leaves its instance as it was (BFCL: its changes up to the "
                        "exception stay)",
}
"""Where the ``corrected`` outcome differs from BFCL's (rule -> ours, and BFCL's behaviour)."""

_VALUE_CHARS = 200
_MISSING = ("the bfcl environment needs the bfcl-eval package: pip install -r requirements/bfcl.txt && "
            "pip install --no-deps -r requirements/bfcl-nodeps.txt")


def bfcl_environment(project_root: str | os.PathLike | None = None) -> str:
    """Point `BFCL_PROJECT_ROOT` at a scratch folder (unless already set) before `bfcl_eval` is imported
    (its checker modules create folders there at import)."""
    if project_root is not None:
        os.environ["BFCL_PROJECT_ROOT"] = str(project_root)
    elif not os.environ.get("BFCL_PROJECT_ROOT"):
        os.environ["BFCL_PROJECT_ROOT"] = tempfile.mkdtemp(prefix="tooltune-bfcl-")
    os.makedirs(os.environ["BFCL_PROJECT_ROOT"], exist_ok=True)
    return os.environ["BFCL_PROJECT_ROOT"]


def package_data_dir() -> Path:
    """The installed `bfcl_eval` package's data folder (found without importing the package)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(_MISSING)
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def function_docs(class_name: str) -> list[dict[str, Any]]:
    """BFCL's function documents of `class_name` (its multi-turn func doc file, one JSON per line)."""
    path = package_data_dir() / "multi_turn_func_doc" / CLASSES[class_name][1]
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def api_class(class_name: str) -> type:
    """The BFCL class itself (imported on first use)."""
    module_name = CLASSES[class_name][0]
    if importlib.util.find_spec("bfcl_eval") is None:
        raise ImportError(_MISSING)
    bfcl_environment()
    module = importlib.import_module(f"{_PREFIX}.{module_name}")
    return getattr(module, class_name)


def public_functions(cls: type) -> dict[str, types.FunctionType]:
    """Plain functions defined on `cls` or its bases (not `object`) whose names have no leading
    underscore: the only things a call can reach."""
    out: dict[str, types.FunctionType] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for name, value in vars(klass).items():
            if not name.startswith("_") and inspect.isfunction(value):
                out[name] = value
    return out


def instantiate(involved: list[str], initial_config: dict[str, Any]) -> dict[str, Any]:
    """Fresh instances of `involved`, each loaded with a deep copy of its scenario (BFCL's executor)."""
    out = {}
    for name in involved:
        inst = api_class(name)()
        if name not in STATELESS:
            inst._load_scenario(copy.deepcopy(initial_config.get(name) or {}), long_context=False)
        out[name] = inst
    return out


def result_text(value: Any) -> str:
    """A result as BFCL's executor shows it: strings as they are, dicts as JSON, anything else str()."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def state_differences(model: Any, truth: Any) -> dict[str, dict[str, str]]:
    """Public attributes of `truth` whose value differs in `model` (BFCL's `state_checker`)."""
    missing = object()
    out = {}
    for attr, want in vars(truth).items():
        if attr.startswith("_"):
            continue
        got = getattr(model, attr, missing)
        if got is missing or got != want:
            out[attr] = {"model": repr(got)[:_VALUE_CHARS], "ground_truth": repr(want)[:_VALUE_CHARS]}
    return out


def _restore(inst: Any, before: dict[str, Any] | None) -> None:
    """Put `inst`'s attributes back to the snapshot `before` (never cut short by a step's alarm)."""
    if before is not None:
        with shielded():
            vars(inst).clear()
            vars(inst).update(before)


def _steps(value: Any, where: str) -> list[list[ToolCall]]:
    if not isinstance(value, list):
        raise TaskError(f"{where}: expected a list of steps")
    try:
        if all(isinstance(s, list) for s in value):
            return [calls_from_any(s, f"{where}[{i}]") for i, s in enumerate(value)]
        return [[c] for c in calls_from_any(value, where)]
    except SchemaError as e:
        raise TaskError(str(e)) from None


class BfclEnvironment(Environment):
    """BFCL's multi-turn API classes (see the module docstring).

    `scoring`: ``official`` (`Scoring.OFFICIAL`, BFCL's own outcome) unless given, as everywhere else;
    the training signal is ``corrected``, which `make_environment("bfcl")` builds for agentic training
    and the integrations (`corrected_environment`)."""

    name = "bfcl"

    def __init__(self, scoring: Scoring | str = Scoring.OFFICIAL) -> None:
        super().__init__()
        self.scoring = Scoring.of(scoring)

    @property
    def official(self) -> bool:
        return self.scoring is Scoring.OFFICIAL

    def _load(self, task: Sample, spec: dict[str, Any]) -> None:
        where = f"sample {task.id!r}: meta.env"
        involved = spec.get("involved_classes")
        if (not isinstance(involved, list) or not involved or len(set(map(str, involved))) != len(involved)
                or not all(isinstance(c, str) and c in CLASSES for c in involved)):
            raise TaskError(f"{where}.involved_classes must list distinct names of {sorted(CLASSES)}, "
                            f"got {involved!r:.200}")
        config = spec.get("initial_config")
        config = {} if config is None else config
        if not isinstance(config, dict) or not all(isinstance(config.get(c) or {}, dict) for c in involved):
            raise TaskError(f"{where}.initial_config must be an object of per-class objects")
        required = spec.get("required_responses") or []
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise TaskError(f"{where}.required_responses must be a list of strings")
        self.ground_truth = _steps(spec.get("ground_truth") or [], f"{where}.ground_truth")
        self.involved, self.config, self.required = list(involved), config, required
        for name in self.involved:  # ImportError (with how to install) when bfcl-eval is missing
            api_class(name)
        try:
            self.instances = instantiate(self.involved, config)
        except Exception as e:  # a scenario BFCL's loader cannot read
            raise TaskError(f"{where}.initial_config: {type(e).__name__}: {e}") from None
        for cls in set(self.involved) & set(TREE_CLASSES):
            problem = tree_problem(self.instances[cls])
            if problem:
                raise TaskError(f"{where}.initial_config.{cls}: {problem}")
        self.methods = {name: (cls, fn) for cls in self.involved
                        for name, fn in public_functions(type(self.instances[cls])).items()}
        self.offered = spec_by_name(task.tools)
        unknown = sorted(set(self.offered) - set(self.methods))
        if unknown:
            raise TaskError(f"sample {task.id!r}: tools {unknown} are not methods of {self.involved}")
        self.results: list[str] = []
        self._truth: tuple[dict[str, Any], list[str], list[str]] | None = None

    def _execute(self, call: ToolCall) -> ToolResult:
        if call.name not in (self.methods if self.official else self.offered):
            return error_result(f"function {call.name!r:.80} is not available; "
                                f"available: {', '.join(sorted(self.offered))[:600]}")
        problem = check_literals(call) or argument_problem(call)
        if not self.official:
            problem = problem or check_arguments(call, self.offered[call.name])
        if problem:
            return error_result(problem)
        text, failed = self._run(self.instances, call)
        self.results.append(text)
        return ToolResult(text[:MAX_RESULT_CHARS], error=failed)

    def _run(self, instances: dict[str, Any], call: ToolCall) -> tuple[str, bool]:
        """Run an admitted call on `instances`: (the tool message, whether it failed)."""
        cls, fn = self.methods[call.name]
        inst = instances[cls]
        bound = types.MethodType(fn, inst)
        kwargs = copy.deepcopy(dict(call.arguments))
        if not self.official:  # BFCL calls the method as it is (a wrong argument raises inside the call)
            try:
                inspect.signature(bound).bind(**kwargs)
            except TypeError as e:
                return f"Error during execution: {call.name}: {e}", True
        shaped = cls in TREE_CLASSES
        before = copy.deepcopy(vars(inst)) if shaped or not self.official else None
        precision, mpmath = decimal.getcontext().prec, sys.modules.get("mpmath")
        digits = mpmath.mp.dps if mpmath is not None else None
        try:
            value = bound(**kwargs)
        except Exception as e:  # the API's own failure: BFCL's message (corrected: the state as it was)
            if not self.official:
                _restore(inst, before)
            return f"Error during execution: {e}", True
        except StepTimeout:  # stopped at the step's budget: as a failure of the method
            if not self.official:
                _restore(inst, before)
            raise
        finally:  # MathAPI sets these process-wide
            with shielded():
                decimal.getcontext().prec = precision
                if mpmath is not None and digits is not None:
                    mpmath.mp.dps = digits
        problem = tree_problem(inst) if shaped else None
        if problem:  # refused in both scorings: the file system as it was before the call
            _restore(inst, before)
            return json.dumps({"error": f"{call.name}: {problem}"}), True
        return result_text(value), isinstance(value, dict) and "error" in value

    def truth(self) -> tuple[dict[str, Any], list[str], list[str]]:
        """The ground truth replayed on fresh instances: (instances, tool messages, failed calls)."""
        if self._truth is None:
            instances = instantiate(self.involved, self.config)
            results, failed = [], []
            for call in (c for step in self.ground_truth for c in step):
                text, bad = self._run(instances, call) if call.name in self.methods else (
                    f"unknown function {call.name!r}", True)
                results.append(text)
                if bad:
                    failed.append(f"{call.name}: {text[:_VALUE_CHARS]}")
            self._truth = (instances, results, failed)
        return self._truth

    def outcome(self, final_text: str | None = None) -> Outcome:
        """BFCL's multi-turn check after the last turn: every involved instance has the public state of
        the ground truth replayed from the same initial config (`state_checker`), and the responses were
        produced. ``corrected``: every required response equals one of the episode's tool messages or is
        contained in the final answer text. ``official`` (`response_checker`): every tool message of the
        replayed ground truth equals a distinct one of the episode's. Score 1.0 on success, else 0.0."""
        instances, truth_results, failed = self.truth()
        differences = {cls: d for cls in self.involved
                       if (d := state_differences(self.instances[cls], instances[cls]))}
        if self.official:
            missing, left = [], list(self.results)
            for r in truth_results:
                if r in left:
                    left.remove(r)
                else:
                    missing.append(r[:_VALUE_CHARS])
        else:
            said = final_text or ""
            missing = [r[:_VALUE_CHARS] for r in self.required if r not in self.results and r not in said]
        ok = not differences and not missing
        details: dict[str, Any] = {"differences": differences, "missing_responses": missing,
                                   "calls": self.calls_made, "errors": self.errors, "scoring": self.scoring}
        if failed:
            details["ground_truth_errors"] = failed
        return Outcome(ok, 1.0 if ok else 0.0, details)


def corrected_environment() -> BfclEnvironment:
    """The registered ``bfcl`` environment: corrected scoring, the training signal."""
    return BfclEnvironment(Scoring.CORRECTED)


register_environment(BfclEnvironment.name, corrected_environment)
