"""Read a predictions file (`{"id": ..., "result": ...}` per line) without trusting any line.

A predictions file is model output written to disk, so a line may be anything: not JSON, JSON nested
200,000 levels deep, an integer of 5,000 digits, a gigabyte on one line, bytes that are not UTF-8. No
line stops the reading and none is silently lost:

- a line that cannot be read as an object with ``id`` and ``result`` is **unreadable**; when its id can
  still be recovered from its text (an ``"id": ...`` key at its start or end), that id has an unreadable
  prediction (`PredictionsFile.unreadable`: id -> ``file:line: reason``; evaluation fails the entry with
  that reason), otherwise the line is listed in `PredictionsFile.unreadable_lines`; either way a warning
  names the file and line;
- a result nested deeper than `MAX_RESULT_DEPTH` levels or a line longer than `MAX_LINE_BYTES` is
  unreadable too (the parsers downstream bound their input the same way);
- an id on several lines is a **duplicate** (`PredictionsFile.duplicates`); when its lines disagree it
  is refused (`DuplicatePredictions`, naming the id and its lines) unless the caller says which line
  wins (`duplicates`: ``first`` or ``last``); equal lines (a resumed evaluation may write an entry's
  completion twice) need no choice;
- a file without one readable prediction is not a predictions file (`ValueError` naming its first bad
  line).

Which ids a benchmark does not know is for the caller to count (`tooltune.evaluation.runner` reports
them in summary.json).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DUPLICATES = ("refuse", "first", "last")
"""What to do with an id that appears on several lines."""
MAX_RESULT_DEPTH = 64
"""Deepest nesting of lists and objects in one result (BFCL's multi-turn layout needs 3)."""
MAX_LINE_BYTES = 64 << 20
"""Longest line read; a longer one is unreadable (its id is still looked for at its ends)."""
_EDGE = 2048
_ID = r'"id"\s*:\s*("(?:[^"\\]|\\.){0,1000}"|-?\d{1,40})'
_ID_FIRST = re.compile(r"^\s*\{\s*" + _ID)
_ID_LAST = re.compile(r",\s*" + _ID + r"\s*\}\s*$")


class DuplicatePredictions(ValueError):
    """An id appears on several lines of a predictions file and no rule says which one wins."""


@dataclass
class PredictionsFile:
    """What a predictions file holds: the readable results by id, the ids whose line could not be read
    (with ``file:line: reason``), the unreadable lines without an id, and the duplicated ids resolved
    (id -> the line numbers it appeared on)."""

    predictions: dict[str, Any] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    unreadable_lines: list[str] = field(default_factory=list)
    duplicates: dict[str, list[int]] = field(default_factory=dict)


def _shown(id_: str) -> str:
    """An id for a message: its repr, cut after 200 characters."""
    return repr(id_ if len(id_) <= 200 else id_[:200] + "...")


def _depth_problem(value: Any) -> str | None:
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (list, dict)):
            if depth > MAX_RESULT_DEPTH:
                return f"the result is nested deeper than {MAX_RESULT_DEPTH} levels"
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return None


def _recover_id(head: str, tail: str) -> str | None:
    """The id named at the start or the end of an unreadable line, or None."""
    for pattern, text in ((_ID_FIRST, head), (_ID_LAST, tail)):
        m = pattern.search(text)
        if m:
            try:
                return str(json.loads(m.group(1)))
            except ValueError:
                return None
    return None


def _parse(raw: bytes) -> tuple[str | None, Any, str | None]:
    """(id, result, None) for a readable line, (recovered id or None, None, reason) otherwise."""
    text = raw.decode("utf-8", "replace")
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return _recover_id(text[:_EDGE], text[-_EDGE:]), None, f"not valid UTF-8 (byte {e.start + 1})"
    try:
        rec = json.loads(line)
    except RecursionError:
        why = "nested too deeply to read"
    except ValueError as e:  # not JSON, or an integer past Python's digit limit
        why = f"not valid JSON ({getattr(e, 'msg', None) or str(e)[:120]})"
    else:
        if not isinstance(rec, dict) or "id" not in rec or "result" not in rec:
            why = "expected an object with 'id' and 'result'"
        elif isinstance(rec["id"], (dict, list)):
            why = "the id is not a string or a number"
        else:
            why = _depth_problem(rec["result"])
            if why is None:
                return str(rec["id"]), rec["result"], None
    return _recover_id(text[:_EDGE], text[-_EDGE:]), None, why


def _lines(f: Any) -> Any:
    """(line number, bytes of the line or a placeholder when too long, tail text) for every line."""
    lineno = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):  # skip to the end of the line
            head, tail = raw[:_EDGE], raw[-_EDGE:]
            while raw and not raw.endswith(b"\n"):
                raw = f.readline(1 << 20)
                tail = (tail + raw)[-_EDGE:]
            yield lineno, None, (head.decode("utf-8", "replace"), tail.decode("utf-8", "replace"))
        else:
            yield lineno, raw, None


def read_predictions(path: str | Path, duplicates: str = "refuse") -> PredictionsFile:
    """Read the predictions file `path` (see the module docstring); `duplicates`: ``refuse``, or which
    line of a duplicated id wins (``first``, ``last``)."""
    if duplicates not in DUPLICATES:
        raise ValueError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
    out = PredictionsFile()
    seen: dict[str, list[int]] = {}
    firsts: dict[str, tuple[Any, str | None]] = {}  # id -> its first line's (result, reason unreadable)
    conflicting: set[str] = set()
    first_bad = None
    with open(path, "rb") as f:
        for lineno, raw, edges in _lines(f):
            if raw is not None and not raw.strip():
                continue
            where = f"{path}:{lineno}"
            if raw is None:
                id_, result, why = _recover_id(*edges), None, f"longer than {MAX_LINE_BYTES} bytes"
            else:
                id_, result, why = _parse(raw.rstrip(b"\r\n"))
            if why is not None:
                first_bad = first_bad or f"{where}: {why}"
                whose = f" for id {_shown(id_)}" if id_ else ""
                logger.warning("%s: unreadable prediction%s: %s", where, whose, why)
            if id_ is None:
                out.unreadable_lines.append(f"{where}: {why}")
                continue
            seen.setdefault(id_, []).append(lineno)
            if id_ in firsts and firsts[id_] != (result, why and why.split(" (")[0]):
                conflicting.add(id_)
            firsts.setdefault(id_, (result, why and why.split(" (")[0]))
            if len(seen[id_]) > 1 and duplicates == "first":
                continue
            out.predictions.pop(id_, None)
            out.unreadable.pop(id_, None)
            if why is None:
                out.predictions[id_] = result
            else:
                out.unreadable[id_] = f"{where}: {why}"
    out.duplicates = {i: lines for i, lines in seen.items() if len(lines) > 1}
    if conflicting and duplicates == "refuse":
        some = [(i, seen[i]) for i in sorted(conflicting, key=lambda i: seen[i][0])[:3]]
        shown = "; ".join(f"id {_shown(i)} on lines {', '.join(map(str, ls[:10]))}" for i, ls in some)
        more = f" (and {len(conflicting) - 3} more ids)" if len(conflicting) > 3 else ""
        raise DuplicatePredictions(f"{path}: {len(conflicting)} id(s) appear on several lines that differ: "
                                   f"{shown}{more}; say which line wins (--prediction-duplicates first or "
                                   "last)")
    if not out.predictions and first_bad is not None:  # nothing readable: not a predictions file
        raise ValueError(f"{first_bad}; no line of {path} is a prediction ({{\"id\", \"result\"}} per line)")
    return out
