"""API-Bank level-1 and level-2 API-call accuracy, scored as AlibabaResearch/DAMO-ConvAI `api-bank/`
(commit 483554e, `evaluator_by_json.py`) scores it.

Samples are read through the data source adapter (`tooltune.data.sources.apibank`), so the prompt shows the
same dialogue and API descriptions as training data would; each sample also carries its ground truth as
the official evaluator builds it from the dialogue file (`dialogues.Truth`, in `meta["apibank_truth"]`).

`score(..., scoring="official")`: the request is read from the completion (the official regex reading when
the template answers in API-Bank's own format, the `python` grammar; the template's grammar otherwise, see
`extraction`), its API name must equal the ground truth's, it is executed on freshly initialised tools (our
re-implementation of the official tools, `manager`), and the tool's own check compares its result with the
result recorded in the dialogue. `scoring="corrected"` applies the named fixes of docs/evaluation.md
(`CORRECTIONS`). Accuracy per level is the share of correct samples (the official formula: every API
sample of the level's dialogues counts); overall is the count-weighted mean of the levels.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tooltune.data.sources import get_source
from tooltune.evaluation.apibank.dialogues import Truth, dialogue_files, truth_for
from tooltune.evaluation.apibank.extraction import (
    Request,
    corrected_request,
    decoded_request,
    literal_lists,
    official_request,
)
from tooltune.evaluation.apibank.manager import TOOL_CLASSES, check, execute
from tooltune.evaluation.verdict import Verdict, category_accuracy, check_scoring
from tooltune.parsing import parse_completion
from tooltune.prompts import grammar_for
from tooltune.schema import Sample, Scoring, ToolCall

logger = logging.getLogger(__name__)

LEVELS = ("level-1", "level-2")
SCORINGS = tuple(Scoring)
TRUTH_KEY = "apibank_truth"
CORRECTIONS = ("one_request_one_call", "python_values", "dialogue_state", "truth_executed",
               "delete_meeting_start_time", "unexecutable_truth")
"""The named fixes `scoring="corrected"` applies (docs/evaluation.md explains each)."""

__all__ = ["CORRECTIONS", "LEVELS", "SCORINGS", "TOOL_CLASSES", "call_matches", "data_files",
           "dialogue_files", "judge", "load_samples", "read_request", "score", "scores"]


def data_files(data_dir: str | os.PathLike, levels: Iterable[str] = LEVELS) -> list[str]:
    """The level files (`level-N-api.json`); their dialogue folders must exist too (`dialogue_files`)."""
    levels = list(levels)
    files = [str(Path(data_dir) / f"{lv}-api.json") for lv in levels]
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise FileNotFoundError(f"API-Bank file(s) not found: {', '.join(missing)}")
    dialogue_files(data_dir, levels)
    return files


def load_samples(data_dir: str | os.PathLike, levels: Iterable[str] = LEVELS) -> list[tuple[str, Sample]]:
    """(level, Sample) pairs; ids are `<level>/<dialogue file>#<id>` (unique across levels); each sample's
    `meta["apibank_truth"]` holds its ground truth from the dialogue file."""
    levels = list(levels)
    src = get_source("apibank")
    out = []
    for lv, path in zip(levels, data_files(data_dir, levels)):
        for rec in src.read(path):
            for s in src.convert(rec.data, rec.position):
                if isinstance(s, Sample):
                    s.id = f"{lv}/{s.id.split(':', 1)[-1]}"
                    truth = truth_for(data_dir, lv, str(s.meta.get("file")), int(s.meta.get("raw_id")))
                    s.meta[TRUTH_KEY] = truth.to_dict()
                    out.append((lv, s))
    return out


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
    grammar decodes the calls (see `extraction`)."""
    grammar = grammar_for(template)
    corrected = scoring == "corrected"
    if grammar.name == "python":
        return corrected_request(text) if corrected else official_request(text)
    parsed = parse_completion(text, grammar, mode)
    if parsed.calls is None:
        return Request(None, error=f"decode_failed: {parsed.error}")
    return decoded_request(parsed.calls, corrected)


def score(sample: Sample, level: str, text: Any, template: str, mode: str = "strict",
          scoring: Scoring = Scoring.OFFICIAL) -> Verdict:
    """One API-Bank sample's verdict under `scoring` ("official" or "corrected"); never raises on `text`."""
    check_scoring(scoring)
    raw = sample.meta.get(TRUTH_KEY)
    if not isinstance(raw, Mapping):
        return Verdict(sample.id, level, False, "no_truth: the sample has no dialogue ground truth "
                                                "(load it with apibank.load_samples)")
    truth = Truth.from_dict(dict(raw))
    request = read_request(text, template, mode, scoring)
    if request.error:
        return Verdict(sample.id, level, False, request.error)
    ok, why = judge(request, truth, scoring == "corrected")
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
