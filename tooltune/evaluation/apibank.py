"""API-Bank level-1 and level-2 call accuracy (AlibabaResearch/DAMO-ConvAI `api-bank/`).

Each sample's expected output is one request `API-Request: [ApiName(key='value', ...)]`; samples are
read through the data source adapter (`tooltune.data.sources.apibank`), so the prompt shows the same
dialogue and API descriptions as training data would. Scoring rule: a sample is correct when the
completion decodes (with the template's grammar) to exactly one call whose API name equals the
expected one and whose parameters have the same names and the same values, values compared as text
with surrounding whitespace ignored (API-Bank writes every value as a quoted string, so `5` and `'5'`
are the same request). Accuracy per level is the share of correct samples; overall is the
count-weighted mean of the two levels.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tooltune.data.sources import get_source
from tooltune.evaluation.verdict import Verdict, category_accuracy
from tooltune.parsing import parse_completion
from tooltune.prompts import grammar_for
from tooltune.schema import Sample, ToolCall

LEVELS = ("level-1", "level-2")


def data_files(data_dir: str | os.PathLike, levels: Iterable[str] = LEVELS) -> list[str]:
    files = [str(Path(data_dir) / f"{lv}-api.json") for lv in levels]
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise FileNotFoundError(f"API-Bank file(s) not found: {', '.join(missing)}")
    return files


def load_samples(data_dir: str | os.PathLike, levels: Iterable[str] = LEVELS) -> list[tuple[str, Sample]]:
    """(level, Sample) pairs; ids are `<level>/<dialogue file>#<id>` (unique across levels)."""

    src = get_source("apibank")
    out = []
    for lv, path in zip(levels, data_files(data_dir, levels)):
        for rec in src.read(path):
            for s in src.convert(rec.data, rec.position):
                if isinstance(s, Sample):
                    s.id = f"{lv}/{s.id.split(':', 1)[-1]}"
                    out.append((lv, s))
    return out


def _text(v: Any) -> str:
    return v.strip() if isinstance(v, str) else str(v).strip()


def call_matches(pred: ToolCall, gold: ToolCall) -> bool:
    if pred.name != gold.name or set(pred.arguments) != set(gold.arguments):
        return False
    return all(_text(pred.arguments[k]) == _text(v) for k, v in gold.arguments.items())


def score(sample: Sample, category: str, text: Any, template: str, mode: str = "strict") -> Verdict:
    parsed = parse_completion(text, grammar_for(template), mode)
    if parsed.calls is None:
        return Verdict(sample.id, category, False, f"decode_failed: {parsed.error}")
    if len(parsed.calls) != 1:
        return Verdict(sample.id, category, False, f"wrong_count: {len(parsed.calls)} calls, expected 1")
    pred, gold = parsed.calls[0], sample.answer[0]
    if pred.name != gold.name:
        return Verdict(sample.id, category, False, f"wrong_api: {pred.name!r}, expected {gold.name!r}")
    if not call_matches(pred, gold):
        return Verdict(sample.id, category, False,
                       f"wrong_parameters: {pred.arguments!r}, expected {gold.arguments!r}")
    return Verdict(sample.id, category, True)


def scores(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    cats = category_accuracy(records)
    total = sum(c["total"] for c in cats.values())
    overall = sum(c["correct"] for c in cats.values()) / total if total else None
    return {"categories": cats, "overall": overall}
