"""ACEBench (English): the files of the ACEBench/ACEBench repository's `data_all/data_en/` folder.

Files: `data_<category>.json` (one object per line: {"id", "question": "user: ...\\nsystem: ...",
"function": [...], "time" | "profile"}) and `possible_answer/data_<category>.json` ({"id",
"ground_truth"}). Dialogue lines `user:` / `system:` become user / assistant turns (a `system:` line
that is a Python call list becomes an assistant tool call). Normal categories' ground truth is
{func: args} (a list of such = alternatives; the first is the answer, all kept in meta); a function
called several times appears as `func_1`, `func_2`, which map back to `func`. Special categories
(irrelevant, incomplete, error_param) expect no call: answer [] with the expected text or lists in
meta. Agent categories are judged on the final environment state and are rejected with a reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from tooltune.data.sources.base import (
    DataFileError,
    Position,
    RawRecord,
    RecordError,
    Rejection,
    infer_category,
    make_sample,
    require_str,
    tools_from_list,
)
from tooltune.data.sources.reading import iter_with_answers, unpack_entry
from tooltune.parsing import parse_python_calls
from tooltune.schema import Sample, ToolCall

NAME = "acebench"
REQUIRED_FIELDS = ("id", "question", "function")
_FILE_RE = re.compile(r"^data_(?P<cat>[a-z_]+)\.json$")
_TURN_RE = re.compile(r"(?m)^(user|system):[ \t]?")
_SUFFIX_RE = re.compile(r"^(?P<base>.+)_\d+$")


def data_files(spec: str) -> list[str]:
    if os.path.isfile(spec):
        return [spec]
    if not os.path.isdir(spec):
        raise DataFileError(f"{spec}: no such ACEBench data file or folder")
    return [os.path.join(spec, n) for n in sorted(os.listdir(spec)) if _FILE_RE.match(n)]


def read(spec: str, split: str = "train", lenient: bool = False) -> Iterator[RawRecord]:
    for path in data_files(spec):
        m = _FILE_RE.match(os.path.basename(path))
        if not m:
            raise DataFileError(f"{path}: not an ACEBench data file name (expected data_<category>.json)")
        yield from iter_with_answers(path, m.group("cat"), REQUIRED_FIELDS, lenient)


def is_multi_turn(raw: Any) -> bool:
    entry = raw.get("entry") if isinstance(raw, Mapping) else None
    return isinstance(entry, Mapping) and str(entry.get("question", "")).count("user:") > 1


def parse_dialogue(question: str) -> list[dict[str, Any]]:
    """'user: ...\\nsystem: ...' -> messages; text before the first tag is a user turn."""
    messages: list[dict[str, Any]] = []
    marks = list(_TURN_RE.finditer(question))
    head = question[: marks[0].start()].strip() if marks else question.strip()
    if head:
        messages.append({"role": "user", "content": head})
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(question)
        text = question[m.end() : end].strip()
        if m.group(1) == "user":
            messages.append({"role": "user", "content": text})
            continue
        calls = parse_python_calls(text) if text.startswith("[") and "(" in text else None
        if calls:
            messages.append({"role": "assistant", "content": "", "tool_calls": [c.to_dict() for c in calls]})
        else:
            messages.append({"role": "assistant", "content": text})
    return messages


def _calls(gt: Mapping[str, Any], names: set[str], where: str) -> list[ToolCall]:
    calls = []
    for name, args in gt.items():
        if name not in names:
            m = _SUFFIX_RE.match(name)
            if m and m.group("base") in names:
                name = m.group("base")
        if not isinstance(args, Mapping):
            raise RecordError("answer_schema_error", f"{where}.{name}", "expected an object of arguments")
        calls.append(ToolCall(name=name, arguments=dict(args)))
    return calls


def convert(raw: Any, pos: Position) -> list[Sample | Rejection]:
    entry, cat, gt, rid = unpack_entry(raw)
    if cat.startswith("agent"):
        raise RecordError(
            "unsupported_category",
            "ground_truth",
            "agent tasks are judged on the final environment state, not on a call list",
        )
    if not raw.get("has_answer"):
        raise RecordError("no_ground_truth", "ground_truth", "no possible_answer entry for this id")
    tools = tools_from_list(entry.get("function"), "function")
    messages = parse_dialogue(require_str(entry, "question"))
    while messages and messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls"):
        messages.pop()  # the model acts after the last user turn
    if not messages:
        raise RecordError("empty_query", "question", "no user turn")
    context = [str(entry[k]).strip() for k in ("time", "profile") if str(entry.get(k) or "").strip()]
    if context:
        messages.insert(0, {"role": "system", "content": "\n".join(context)})
    meta: dict[str, Any] = {"raw_id": rid, "acebench_category": cat}
    if cat.startswith("special"):
        answer: list[ToolCall] = []
        meta["expected"] = gt
    else:
        options = gt if isinstance(gt, list) else [gt]
        if not options or not all(isinstance(o, Mapping) for o in options):
            raise RecordError("answer_schema_error", "ground_truth", "expected {function: arguments} objects")
        names = {t.name for t in tools}
        answer = _calls(options[0], names, "ground_truth")
        if len(options) > 1:
            meta["alternatives"] = [[c.to_dict() for c in _calls(o, names, "ground_truth")] for o in options]
    category = infer_category(messages, tools, answer)
    return [make_sample(NAME, rid, messages, tools, answer, meta, category)]
