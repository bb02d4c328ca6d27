"""The resumable verdict log: a torn last line is cut off, each (seed, id) counts once."""

from __future__ import annotations

import json
from pathlib import Path

from tooltune.evaluation.verdict_log import VerdictLog


def test_verdict_log_resumes_and_drops_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    with VerdictLog(path) as log:
        log.add({"id": "a", "category": "c", "valid": True, "error": None, "seed": 0})
        log.add({"id": "b", "category": "c", "valid": False, "error": "x", "seed": 0})
    with open(path, "a") as f:
        f.write('{"id": "c", "categ')  # a crash in the middle of a write
    with VerdictLog(path, resume=True) as log:
        assert log.done == {(0, "a"), (0, "b")}
        log.add({"id": "c", "category": "c", "valid": True, "error": None, "seed": 0})
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["id"] for r in lines] == ["a", "b", "c"]
    with VerdictLog(path) as log:  # no resume: start over
        assert log.done == set()
    assert path.read_text() == ""


def test_verdict_log_counts_each_seed_and_id_once(tmp_path: Path) -> None:
    """Repeated (seed, id) lines (two writers) count once and are dropped from the file on resume; a line
    separator inside a value does not split a verdict; adding a finished (seed, id) again is ignored."""
    path = tmp_path / "v.jsonl"
    rows = [{"id": "a", "category": "c", "valid": True, "error": None, "seed": 0},
            {"id": "a", "category": "c", "valid": False, "error": "x\u2028y", "seed": 1}]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text + "not json\n" + text, encoding="utf-8")
    with VerdictLog(path, resume=True) as log:
        assert log.done == {(0, "a"), (1, "a")} and log.records == rows
        log.add({**rows[0], "valid": False})
        assert log.records == rows
    assert path.read_text(encoding="utf-8") == text
