"""A predictions file is model output on disk: no line of it stops the reading or is lost without a word.
Unreadable lines count against their id (named file:line), duplicated ids are refused unless the caller
says which line wins, and a file without one readable prediction is refused naming its first bad line."""

from __future__ import annotations

import json
import logging

import pytest

from tooltune.generation import predictions as P
from tooltune.generation.predictions import DuplicatePredictions, read_predictions

GOOD = [{"id": "a", "result": "text a"}, {"id": 7, "result": [["t0s0"], ["t1s0", "t1s1"]]}]


def _file(tmp_path, lines: list[str | bytes], name: str = "p.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    return path


def _good() -> list[str]:
    return [json.dumps(x) for x in GOOD]


HOSTILE = [
    ('{"id": "deep", "result": ' + "[" * 200_000 + "]" * 200_000 + "}", "deep", "nested too deeply"),
    ('{"id": "deep2", "result": ' + "[" * 200_000, "deep2", "nested too deeply"),
    ('{"result": ' + "[" * 200_000 + "]" * 200_000 + ', "id": "tail"}', "tail", "nested too deeply"),
    ('{"id": "digits", "result": ' + "9" * 5000 + "}", "digits", "not valid JSON"),
    ('{"id": "layers", "result": ' + "[" * 100 + "]" * 100 + "}", "layers",
     f"nested deeper than {P.MAX_RESULT_DEPTH} levels"),
    ('{"id": "noresult"}', "noresult", "expected an object with 'id' and 'result'"),
    ('{"id": "cut", "result": "no end', "cut", "not valid JSON"),
    ('{"id": ["a"], "result": "x"}', None, "the id is not a string"),
    ("[1, 2, 3]", None, "expected an object"),
    ("not json at all", None, "not valid JSON"),
]


@pytest.mark.parametrize("line, id_, why", HOSTILE, ids=[h[1] or h[2][:20] for h in HOSTILE])
def test_a_hostile_line_is_an_unreadable_prediction_named_by_file_and_line(tmp_path, caplog, line, id_, why):
    path = _file(tmp_path, [_good()[0], line, _good()[1]])
    with caplog.at_level(logging.WARNING, logger="tooltune.generation.predictions"):
        found = read_predictions(path)
    assert found.predictions == {"a": "text a", "7": GOOD[1]["result"]}  # the other lines are read
    where = f"{path}:2: "
    if id_ is None:
        assert found.unreadable == {} and len(found.unreadable_lines) == 1
        assert found.unreadable_lines[0].startswith(where) and why in found.unreadable_lines[0]
    else:
        assert list(found.unreadable) == [id_]
        assert found.unreadable[id_].startswith(where) and why in found.unreadable[id_]
    assert any(where.rstrip(": ") in r.getMessage() for r in caplog.records)


def test_bytes_that_are_not_utf8_and_an_overlong_line(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "MAX_LINE_BYTES", 1000)
    long_line = '{"id": "long", "result": "' + "x" * 5000 + '"}'
    path = _file(tmp_path, [_good()[0], b'{"id": "bin", "result": "\xff\xfe"}', long_line, _good()[1]])
    found = read_predictions(path)
    assert set(found.predictions) == {"a", "7"}
    assert "not valid UTF-8" in found.unreadable["bin"] and found.unreadable["bin"].startswith(f"{path}:2:")
    long = found.unreadable["long"]
    assert "longer than 1000 bytes" in long and long.startswith(f"{path}:3:")


def test_duplicated_ids_are_refused_unless_told_which_line_wins(tmp_path):
    broken = '{"id": "a", "result": ' + "[" * 99
    lines = [_good()[0], json.dumps({"id": "a", "result": "second"}), _good()[1], broken]
    path = _file(tmp_path, lines)
    with pytest.raises(DuplicatePredictions, match=r"id 'a' on lines 1, 2, 4.*--prediction-duplicates"):
        read_predictions(path)
    first = read_predictions(path, "first")
    assert first.predictions["a"] == "text a" and first.duplicates == {"a": [1, 2, 4]}
    same = read_predictions(_file(tmp_path, [_good()[0], _good()[1], _good()[0]], "same.jsonl"))
    assert same.predictions["a"] == "text a" and same.duplicates == {"a": [1, 3]}  # equal: no choice
    last = read_predictions(path, "last")  # the last line of "a" is unreadable: so is its prediction
    assert "a" not in last.predictions and last.unreadable["a"].startswith(f"{path}:4:")
    with pytest.raises(ValueError, match="duplicates must be one of"):
        read_predictions(path, "newest")


def test_a_file_without_one_readable_prediction_is_refused_naming_its_first_bad_line(tmp_path):
    path = _file(tmp_path, ['{"id": "x", "messages": []}', "garbage"])
    with pytest.raises(ValueError, match=r"p.jsonl:1: expected an object with 'id' and 'result'.*no line"):
        read_predictions(path)
    empty = _file(tmp_path, ["", "  "])
    assert read_predictions(empty).predictions == {}
