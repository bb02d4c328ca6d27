"""BFCL multi-turn results scored as bfcl-eval scores them (`official`) or by this project's rules
(`corrected`).

A result is what BFCL's result files hold per entry: a list per turn of lists per step of raw completion
texts (a predictions file, or the record of a live run). `score_multi_turn` turns it into the calls each
step executes and hands them to `bfcl_eval`'s `multi_turn_checker` (state and response checks).

`official` reproduces bfcl-eval's evaluation of a result file
(`eval_runner._evaluate_single_multi_turn_entry`): a result that is not a list fails (inference error);
a number of turns other than the entry's fails (force-terminated: BFCL's inference stops an entry after
a turn of more than 20 steps); every step is decoded on its own, and a step that cannot be decoded or
holds no call is skipped (later steps of the turn still count); no step limit is applied. Templates in
BFCL's Python-call format (grammar ``python``) are decoded with the rules of
`default_decode_execute_prompting` (`official_decode`: positional arguments dropped, bare names read as
strings, ...); other templates' calls come from their grammar. BFCL executes any public method of the
entry's classes.

`corrected` is what this project's loop does on the replay backend (`CORRECTED_RULES`, and the table in
docs/evaluation.md): turns read by index (missing ones empty, extra ones ignored), steps read as the
replay backend reads them, the first step without calls ends its turn, more than 20 steps with calls in
a turn fail the entry, every template decoded by its grammar, and only the entry's functions executed.

Safety, both modes: BFCL `eval`s call strings. Each string we hand it is built by us from parsed
literal values and must parse (`ast.parse`) as exactly one call of an admitted function with keyword
arguments `ast.literal_eval` accepts, within the per-method argument limits of the `bfcl` environment
(`tooltune.environments.bfcl_limits`: BFCL would compute such a call for minutes, e.g. MathAPI's
`round_number` with ``decimal_places=-10**8``). In `official` a call failing that is replaced by
`REFUSED_CALL` (a name nothing defines: BFCL's executor answers it with an error and runs nothing), so
its step still holds a call, as in BFCL; in `corrected` it is left out. The checker runs under a time
budget of `STEP_SECONDS` per call it replays (`checker_budget`; over it the entry fails with
``checker_timeout``).
"""

from __future__ import annotations

import ast
import json
import keyword
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tooltune.environments.bfcl import CLASSES, api_class, bfcl_environment, public_functions
from tooltune.environments.bfcl_limits import argument_problem
from tooltune.environments.limits import STEP_SECONDS, StepTimeout, step_budget
from tooltune.evaluation.bfcl.data import BfclEntry
from tooltune.evaluation.bfcl.official_decode import bfcl_decode_execute
from tooltune.evaluation.bfcl.scoring import NAME_STYLES
from tooltune.evaluation.verdict import Verdict
from tooltune.parsing import parse_completion, python_literal
from tooltune.parsing.limits import MAX_BLOCK_CHARS
from tooltune.prompts import grammar_for
from tooltune.schema import Scoring, ToolCall

STEP_LIMIT = 20
"""BFCL's `MAXIMUM_STEP_LIMIT`: its inference force-quits an entry after a turn of more steps with calls."""
REFUSED_CALL = "tooltune_refused_call()"
"""What `official` executes in place of a call the safety gate refuses: BFCL's executor evaluates it to
an error message (the name is defined nowhere) and nothing runs, as when BFCL's own `eval` of such a
call fails."""

CORRECTED_RULES: dict[str, str] = {
    "turn_count": "turns are read by index: missing turns are empty, extra turns are ignored (official: "
                  "a result whose number of turns differs from the entry's fails, force-terminated)",
    "step_limit": f"a turn with more than {STEP_LIMIT} steps with calls fails the entry "
                  "(official: result files are not step-counted)",
    "no_call_ends_turn": "the first step without a decodable call ends its turn; later steps of it are "
                         "not played (official: the step is skipped, later steps count)",
    "python_decoding": "the Python-call format is decoded by our grammar: keyword arguments with literal "
                       "values only, a positional argument or an expression makes the step undecodable "
                       "(official: BFCL's decoder drops positional arguments, reads bare names as strings, "
                       "computes arithmetic, renders dicts with its own renderer)",
    "step_layout": "a step stored as a list is read as its first item, any other non-text as its JSON "
                   "(official: a step that is not a text is skipped)",
    "refused_calls": "only the entry's functions run; a refused call is left out of its step "
                     "(official: any public method of the entry's classes runs; a refused call stays as "
                     "a failing call)",
}
"""Where `corrected` differs from `official` (rule -> what corrected does, and what official does)."""


@dataclass
class DecodedResult:
    """A result's executable calls per turn per step, or why the entry fails before any check."""

    turns: list[list[list[str]]] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    """Per skipped or ended step: `turn t step s: reason` (for logs)."""


def call_string(call: ToolCall, allowed: set[str]) -> tuple[str | None, str | None]:
    """The call string BFCL will execute for a parsed call, or (None, reason) when it is not a plain
    literal call of an admitted function: the name and every argument name an identifier (not a
    keyword), values rendered with `python_literal`, the text re-parsed with `ast.parse`, the arguments
    within the method's limits (`argument_problem`)."""
    if call.name not in allowed:
        return None, f"function {call.name!r:.80} does not exist"
    problem = argument_problem(call)
    if problem:
        return None, problem
    if not call.name.isidentifier() or keyword.iskeyword(call.name):
        return None, f"function name {call.name!r:.80} is not an identifier"
    for k in call.arguments:
        if not isinstance(k, str) or not k.isidentifier() or keyword.iskeyword(k):
            return None, f"argument name {k!r:.80} is not an identifier"
    try:
        args = ", ".join(f"{k}={python_literal(v)}" for k, v in call.arguments.items())
    except (TypeError, ValueError, RecursionError) as e:  # repr of an oversized integer
        return None, f"arguments cannot be written as literals ({type(e).__name__})"
    text = f"{call.name}({args})"
    return (text, None) if literal_call(text, allowed) else (None, "not a single plain literal call")


def literal_call(text: str, allowed: set[str]) -> bool:
    """Whether `text` is exactly one call `name(k=literal, ...)` of a function in `allowed`, with
    arguments within the method's limits (`argument_problem`)."""
    if len(text) > MAX_BLOCK_CHARS:
        return False
    try:
        node = ast.parse(text, mode="eval").body
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in allowed
                and not node.args and all(kw.arg is not None for kw in node.keywords)):
            return False
        args = {str(kw.arg): ast.literal_eval(kw.value) for kw in node.keywords}
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return False
    return argument_problem(ToolCall(node.func.id, args)) is None


def entry_functions(entry: Mapping[str, Any]) -> set[str]:
    """The entry's function names, held-out ones included (what `corrected` admits)."""
    held_out = (entry.get("missed_function") or {}).values()
    return {f["name"] for f in entry.get("function") or []} | {f["name"] for docs in held_out for f in docs}


def class_methods(entry: Mapping[str, Any]) -> set[str]:
    """Public methods of the entry's classes (what BFCL's executor reaches, so what `official` admits)."""
    names = entry_functions(entry)
    for cls in entry.get("involved_classes") or []:
        if cls in CLASSES:
            names |= set(public_functions(api_class(cls)))
    return names


def step_calls(text: Any, template: str, mode: str, allowed: set[str], scoring: Scoring
               ) -> tuple[list[str] | None, str | None]:
    """One step's call strings, or (None, reason) when the step holds no call (`official`: skipped;
    `corrected`: the turn ends). `corrected` may return [] (calls, all refused: the turn goes on)."""
    Scoring.of(scoring)
    grammar = grammar_for(template)
    if scoring == Scoring.OFFICIAL:
        if not isinstance(text, str):
            return None, f"not a text ({type(text).__name__})"
        if grammar.name == "python":
            decoded, why = bfcl_decode_execute(text)
            if not decoded:
                return None, why or "empty call list"
            return [s if literal_call(s, allowed) else REFUSED_CALL for s in decoded], None
    elif not isinstance(text, str):  # the replay backend's rules: a list's first item, JSON of the rest
        if isinstance(text, list):
            text = text[0] if text else ""
        try:
            text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return None, f"not a text ({type(text).__name__})"
    parsed = parse_completion(text, grammar, mode)
    if not parsed.calls:
        return None, "empty call list" if parsed.calls == [] else f"undecodable: {parsed.error}"
    built = [call_string(c, allowed)[0] for c in parsed.calls]
    if scoring == Scoring.OFFICIAL:
        return [s if s is not None else REFUSED_CALL for s in built], None
    return [s for s in built if s is not None], None


def decode_result(
    e: BfclEntry, result: Any, template: str, mode: str = "strict", scoring: Scoring = Scoring.OFFICIAL
) -> DecodedResult:
    """The calls each turn's steps execute under `scoring` (see the module docstring)."""
    Scoring.of(scoring)
    n_turns = len(e.ground_truth)
    out = DecodedResult()
    if not isinstance(result, list):
        out.error = ("multi_turn:inference_error: Error during inference phase. "
                     "Model did not output a list of model responses.")
        return out
    if scoring == Scoring.OFFICIAL:
        if len(result) != n_turns:
            out.error = (f"multi_turn:force_terminated: Model was force-terminated during inference phase. "
                         f"The length of the model result turns ({len(result)}) does not match the length "
                         f"of the ground truth turns ({n_turns}).")
            return out
        allowed = class_methods(e.entry)
        for t, turn in enumerate(result):
            if not isinstance(turn, (list, str, dict)):  # BFCL's runner stops on a turn it cannot iterate
                out.error = f"multi_turn:inference_error: turn {t} is a {type(turn).__name__}, not a list"
                return out
            steps: list[list[str]] = []
            for s, text in enumerate(turn):  # BFCL iterates a turn as it is: a text by character
                calls, why = step_calls(text, template, mode, allowed, scoring)
                if calls is None:
                    out.notes.append(f"turn {t} step {s}: skipped: {why}")
                else:
                    steps.append(calls)
            out.turns.append(steps)
        return out
    allowed = entry_functions(e.entry)
    for t in range(n_turns):
        turn = result[t] if t < len(result) else []
        recorded = turn if isinstance(turn, list) else [turn]
        steps = []
        s = 0
        while True:
            text = recorded[s] if s < len(recorded) else ""  # the replay backend's rule past the record
            calls, why = step_calls(text, template, mode, allowed, scoring)
            if calls is None:
                if s < len(recorded):
                    out.notes.append(f"turn {t} step {s}: ends the turn: {why}")
                break
            if calls:
                steps.append(calls)
            s += 1
            if s > STEP_LIMIT:
                out.error = f"multi_turn:force_terminated: more than {STEP_LIMIT} steps in turn {t}"
                return out
        out.turns.append(steps)
    return out


def fresh_model_name() -> str:
    """A model name no earlier check in this process used (BFCL caches instances by model name)."""
    return f"tooltune_{uuid.uuid4().hex[:12]}"


def forget_instances(model_name: str) -> None:
    """Delete the instances BFCL's executor cached in module globals for `model_name`."""
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    prefix = re.sub(r"[-./:]", "_", model_name) + "_"
    for key in [k for k in vars(multi_turn_utils) if k.startswith(prefix)]:
        delattr(multi_turn_utils, key)


def checker_budget(turns: list[list[list[str]]], ground_truth: Any) -> float:
    """Seconds `multi_turn_checker` may take on an entry: `STEP_SECONDS` per call it replays (the
    model's and the ground truth's), plus one."""
    calls = sum(len(s) for turn in turns for s in turn)
    calls += sum(len(t) for t in ground_truth or [] if isinstance(t, list))
    return STEP_SECONDS * (calls + 1)


def check_decoded(e: BfclEntry, turns: list[list[list[str]]], model_name: str | None = None,
                  forget: bool = True) -> Verdict:
    """`multi_turn_checker`'s verdict on already-decoded call strings (built by `step_calls`), within
    `checker_budget` (over it: ``checker_timeout``). The checker's instances are cached under `model_name`
    (a fresh one by default) and deleted afterwards unless `forget` is False (a caller that shares the name
    with entries still running forgets them itself)."""
    bfcl_environment()
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    name = model_name or fresh_model_name()
    try:
        with step_budget(checker_budget(turns, e.ground_truth), f"{e.id}: multi_turn_checker"):
            result = multi_turn_checker(turns, e.ground_truth, e.entry, e.id.rsplit("_", 1)[0], name)
    except StepTimeout as exc:
        return Verdict(e.id, e.category, False, f"checker_timeout: {exc}")
    except Exception as exc:  # the checker's own assertions; the official runner would stop here
        return Verdict(e.id, e.category, False, f"checker_error: {type(exc).__name__}: {exc}")
    finally:
        if forget:
            forget_instances(name)
    if result.get("valid"):
        return Verdict(e.id, e.category, True)
    return Verdict(e.id, e.category, False, f"{result.get('error_type')}: {result.get('error_message')}")


def score_multi_turn(
    e: BfclEntry,
    result: Any,
    template: str = "tool_n1",
    mode: str = "strict",
    name_style: str = "dotted",
    scoring: Scoring = Scoring.OFFICIAL,
) -> Verdict:
    """The verdict on one entry's result (a list per turn of lists per step of raw completion texts).

    `official`: bfcl-eval's evaluation of that result; `corrected`: this project's rules
    (`CORRECTED_RULES`). `template`: a template or grammar name (``python`` grammar: BFCL's decoder in
    `official`); `mode`: the grammar's format mode; `name_style` is accepted for symmetry with the
    single-turn scorer (multi-turn function names have no dots). Never raises on model output."""
    if name_style not in NAME_STYLES:
        raise ValueError(f"name_style must be one of {sorted(NAME_STYLES)}, got {name_style!r}")
    decoded = decode_result(e, result, template, mode, scoring)
    if decoded.error:
        return Verdict(e.id, e.category, False, decoded.error)
    return check_decoded(e, decoded.turns)


def score_multi_turn_predictions(
    entries: Iterable[BfclEntry],
    predictions: Mapping[str, Any],
    template: str = "tool_n1",
    mode: str = "strict",
    name_style: str = "dotted",
    scoring: Scoring = Scoring.OFFICIAL,
    partial: bool = False,
) -> list[Verdict]:
    """Verdicts for `entries` from `predictions` (id -> result, as `ReplayBackend` holds them).

    Every entry needs a result, as BFCL's runner requires, unless `partial` (BFCL's `--partial-eval`):
    then entries without one are left out."""
    entries = list(entries)
    missing = [e.id for e in entries if e.id not in predictions]
    if missing and not partial:
        raise ValueError(f"{len(missing)} entries have no result (first: {missing[:3]}); "
                         "pass partial=True to score only those present")
    return [score_multi_turn(e, predictions[e.id], template, mode, name_style, scoring)
            for e in entries if e.id in predictions]
