"""API-Bank level-1 and level-2 API-call accuracy, scored as AlibabaResearch/DAMO-ConvAI `api-bank/`
(commit 483554e, `evaluator_by_json.py`) scores it.

Each sample carries its ground truth (`truth.Truth`, in `meta["apibank_truth"]`; see `data`).

`score(..., scoring="official")`: the request is read from the completion (the official regex reading
when the template answers in API-Bank's own format, the `python` grammar; the template's grammar otherwise,
see `official_decode`), its API name must equal the ground truth's, it is executed on freshly initialised
tools (our re-implementation of the official tools, `official`), and the tool's own check compares its
result with the result recorded in the dialogue. `scoring="corrected"` applies the named fixes of
docs/evaluation.md (`CORRECTIONS`). Accuracy per level is the share of correct samples (the official
formula: every API sample of the level's dialogues counts); overall is the count-weighted mean of the levels.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from tooltune.evaluation.apibank.data import TRUTH_KEY
from tooltune.evaluation.apibank.official import TOOL_CLASSES, check, execute
from tooltune.evaluation.apibank.official_decode import (
    Request,
    corrected_request,
    decoded_request,
    literal_lists,
    official_request,
)
from tooltune.evaluation.apibank.truth import Truth
from tooltune.evaluation.verdict import Verdict, category_accuracy
from tooltune.parsing import parse_completion
from tooltune.prompts import grammar_for
from tooltune.schema import Sample, Scoring, ToolCall

logger = logging.getLogger(__name__)

CORRECTIONS = ("one_request_one_call", "python_values", "dialogue_state", "truth_executed",
               "delete_meeting_start_time", "unexecutable_truth")
"""The named fixes `scoring="corrected"` applies (docs/evaluation.md explains each)."""


def _text(v: Any) -> str:
    return v.strip() if isinstance(v, str) else str(v).strip()


def call_matches(pred: ToolCall, gold: ToolCall) -> bool:
    """Same API, same parameter names, values equal as text with surrounding whitespace ignored (API-Bank
    writes every value as a quoted string, so `5` and `'5'` are the same request). The comparison that
    `scoring="corrected"` falls back on when the ground-truth call cannot run (`unexecutable_truth`)."""
    if pred.name != gold.name or set(pred.arguments) != set(gold.arguments):
        return False
    return all(_text(pred.arguments[k]) == _text(v) for k, v in gold.arguments.items())


def read_request(text: Any, template: str, mode: str = "strict",
                 scoring: Scoring = Scoring.OFFICIAL) -> Request:
    """The request a completion makes: API-Bank's own reading for the `python` grammar, else the template's
    grammar decodes the calls (see `official_decode`)."""
    grammar = grammar_for(template)
    corrected = scoring == Scoring.CORRECTED
    if grammar.name == "python":
        return corrected_request(text) if corrected else official_request(text)
    parsed = parse_completion(text, grammar, mode)
    if parsed.calls is None:
        return Request(None, error=f"decode_failed: {parsed.error}")
    return decoded_request(parsed.calls, corrected)


def score(sample: Sample, level: str, text: Any, template: str, mode: str = "strict",
          scoring: Scoring = Scoring.OFFICIAL) -> Verdict:
    """One API-Bank sample's verdict under `scoring` ("official" or "corrected"); never raises on `text`."""
    Scoring.of(scoring)
    raw = sample.meta.get(TRUTH_KEY)
    if not isinstance(raw, Mapping):
        return Verdict(sample.id, level, False, "no_truth: the sample has no dialogue ground truth "
                                                "(load it with apibank.load_samples)")
    truth = Truth.from_dict(dict(raw))
    request = read_request(text, template, mode, scoring)
    if request.error:
        return Verdict(sample.id, level, False, request.error)
    ok, why = judge(request, truth, scoring == Scoring.CORRECTED)
    return Verdict(sample.id, level, ok, why)


def judge(request: Request, truth: Truth, corrected: bool = False) -> tuple[bool, str | None]:
    """Whether `request` answers `truth`: its result on fresh tools passes the tool's check against the
    ground-truth result. Corrected: both run after the dialogue's earlier calls and the ground-truth result
    is the expected call's result there (`dialogue_state`, `truth_executed`)."""
    if request.name != truth.api_name:
        return False, f"api_name_mismatch: {request.name!r}, expected {truth.api_name!r}"
    if truth.api_name not in TOOL_CLASSES:
        return False, f"unscorable_offline: no tool {truth.api_name!r}"
    earlier = [(name, literal_lists(name, args)) for name, args in truth.earlier] if corrected else []
    outcome, manager = execute(request.name, request.arguments, earlier)
    expected = truth.result
    if corrected:
        gold, _ = execute(truth.api_name, literal_lists(truth.api_name, truth.arguments), earlier)
        if gold.result is None:  # unexecutable_truth: compare the calls
            same = call_matches(ToolCall(request.name, request.arguments),
                                ToolCall(truth.api_name, truth.arguments))
            return same, None if same else f"wrong_call: the expected call cannot run ({gold.error})"
        expected = gold.result
    if outcome.result is None:
        return False, outcome.error
    if corrected and truth.api_name == "DeleteMeeting":  # delete_meeting_start_time
        return _delete_meeting(outcome.result, expected)
    return check(manager, request.name, outcome.result, expected)


def _delete_meeting(response: Mapping[str, Any], truth: Mapping[str, Any]) -> tuple[bool, str | None]:
    if truth["output"] == "success" and response["output"] == "success":
        ok = response["input"]["start_time"] == truth["input"]["start_time"]
    else:
        ok = response["output"] == truth["output"] and response["exception"] == truth["exception"]
    return ok, None if ok else "output_mismatch"


def scores(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    cats = category_accuracy(records)
    total = sum(c["total"] for c in cats.values())
    overall = sum(c["correct"] for c in cats.values()) / total if total else None
    return {"categories": cats, "overall": overall}
