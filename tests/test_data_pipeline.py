"""Tool-N1 preprocessing: accounting identity, rejections with positions, split, dedupe, augmentation."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooltune.data.pipeline import PrepareConfig, check_sample, prepare, split_of
from tooltune.data.sources import DataFileError, get_source
from tooltune.data.synthetic import SynthConfig, write
from tooltune.data.validate import validate_path
from tooltune.schema import Sample, read_jsonl

TOOL = {
    "name": "get_weather",
    "description": "Weather",
    "parameters": {
        "city": {"type": "str", "description": "City, State"},
        "unit": {"type": "str, optional", "default": "c"},
    },
}
OTHER = {"name": "get_time", "description": "Time", "parameters": {"tz": {"type": "str"}}}

GOOD = {
    "query": "Weather in Austin?",
    "answers": json.dumps([{"name": "get_weather", "arguments": {"city": "Austin, TX"}}]),
    "tools": json.dumps([TOOL, OTHER]),
}
BAD = {
    "tool_not_in_candidates": {**GOOD, "answers": json.dumps([{"name": "nope", "arguments": {}}])},
    "answer_json_error": {**GOOD, "answers": "[{broken"},
    "unknown_argument": {
        **GOOD,
        "answers": json.dumps([{"name": "get_weather", "arguments": {"town": "X"}}]),
    },
    "missing_field": {"query": "q", "tools": "[]"},
    "tools_json_error": {**GOOD, "tools": "not json"},
}


RECORD_LEVEL = ("answer_json_error", "missing_field", "tools_json_error")


def _line(record: dict) -> bytes:
    return json.dumps(record).encode()


def _unit(value: str) -> bytes:
    """A GOOD line whose answer (JSON text) passes `value` as the `unit` argument."""
    answers = '[{"name": "get_weather", "arguments": {"city": "Austin, TX", "unit": ' + value + "}}]"
    return _line({**GOOD, "answers": answers})


DEEP = b"[" * 100_000 + b"]" * 100_000
HOSTILE = [
    # (reason, level, raw JSONL line): one hostile record among good ones
    pytest.param("too_deep", "record", DEEP, id="deep line"),
    pytest.param("too_deep", "record", _line({**GOOD, "answers": DEEP.decode()}), id="deep answers text"),
    pytest.param("too_deep", "sample", _unit("[" * 150 + "]" * 150), id="deep arguments"),
    pytest.param(
        "huge_integer", "record", _line(GOOD)[:-1] + b', "n": ' + b"9" * 5000 + b"}", id="huge int in line"
    ),
    pytest.param("huge_integer", "record", _unit("9" * 5000), id="huge argument"),
    pytest.param("invalid_utf8", "record", _line(GOOD).replace(b"Austin?", b"Austin\xff?"), id="bad utf-8"),
    pytest.param("non_finite_number", "record", _unit("NaN"), id="NaN"),
    pytest.param("non_finite_number", "record", _unit("-Infinity"), id="-Infinity"),
    pytest.param("non_finite_number", "record", _unit("1e999"), id="1e999"),
    # answers already decoded in the raw record: the number reaches the sample, which is refused
    pytest.param(
        "non_finite_number",
        "sample",
        _line(GOOD)[:-1] + b', "answers": [{"name": "get_weather", "arguments": {"city": Infinity}}]}',
        id="Infinity in decoded answers",
    ),
    pytest.param("json_error", "record", b'{"query": "cut off in the mid', id="truncated line"),
]
HOSTILE_LINES = {p.id: p.values for p in HOSTILE}


def _write(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _unique_good(i: int) -> dict:
    return {**GOOD, "query": f"Weather in city number {i}?"}


def test_rejections_counted_by_reason_with_position(tmp_path: Path):
    records = [_unique_good(0), *BAD.values(), _unique_good(0), _unique_good(1)]
    src = _write(tmp_path / "in.jsonl", records)
    stats = prepare(PrepareConfig(sources=[("xlam", src)], out=str(tmp_path / "out"), progress=False))
    st_ = stats["xlam"]
    assert st_.records_in == len(records) and st_.samples_kept == 2
    expected = {**{k: 1 for k in BAD}, "duplicate": 1}
    assert dict(st_.records_rejected) == expected
    rejected = _lines(tmp_path / "out" / "rejected.jsonl")
    assert len(rejected) == sum(expected.values())
    by_reason = {r["reason"]: r for r in rejected}
    assert by_reason["answer_json_error"]["position"] == {"file": src, "line": 3}
    assert by_reason["answer_json_error"]["field"] == "answers"
    assert (
        by_reason["tool_not_in_candidates"]["level"] == "sample"
        and "sample" in by_reason["tool_not_in_candidates"]
    )
    saved = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert saved["sources"]["xlam"]["records_rejected"] == expected


def test_check_arguments_modes():
    s = Sample(
        id="a",
        source="x",
        category="simple",
        messages=[{"role": "user", "content": "q"}],
        tools=[
            {
                "name": "f",
                "parameters": {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]},
            }
        ],
        answer=[{"name": "f", "arguments": {"a": 1}}],
    )
    assert check_sample(s, "unknown") is None
    assert check_sample(s, "strict").reason == "missing_required_argument"
    s.answer[0].arguments["zzz"] = 1
    assert check_sample(s, "off") is None and check_sample(s, "unknown").reason == "unknown_argument"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(["good", *BAD, *HOSTILE_LINES]), min_size=1, max_size=25),
    st.floats(0, 1),
    st.booleans(),
)
def test_accounting_identity_holds_for_any_mix(tmp_path_factory, kinds, augment, dedupe):
    """Good, malformed and hostile records in any order: every record is kept or rejected, counts add up."""
    tmp = tmp_path_factory.mktemp("acc")
    # the first record always fits the format: a first record without the format's fields is a wrong file
    kinds = ["good", *kinds]
    records = [
        _line(_unique_good(i)) if k == "good" else _line(BAD[k]) if k in BAD else HOSTILE_LINES[k][2]
        for i, k in enumerate(kinds)
    ]
    (tmp / "in.jsonl").write_bytes(b"\n".join(records) + b"\n")
    stats = prepare(
        PrepareConfig(
            sources=[("xlam", str(tmp / "in.jsonl"))],
            out=str(tmp / "o"),
            irrelevance_augment=augment,
            dedupe=dedupe,
            progress=False,
        )
    )
    s = stats["xlam"]
    assert s.records_in == len(records) == s.records_kept + sum(s.records_rejected.values())
    assert s.samples_produced + s.samples_augmented == s.samples_kept + sum(s.samples_rejected.values())
    kept = len(_lines(tmp / "o" / "train.jsonl")) + len(_lines(tmp / "o" / "val.jsonl"))
    assert kept == s.samples_kept == s.train + s.val
    rejected = [_strict_json(x) for x in (tmp / "o" / "rejected.jsonl").read_text().splitlines()]
    hostile_record_level = {k for k, (_, level, _) in HOSTILE_LINES.items() if level == "record"}
    record_level = [k for k in kinds if k in RECORD_LEVEL or k in hostile_record_level]
    assert sum(r["level"] == "record" for r in rejected) == len(record_level)
    assert sum(r["level"] == "sample" for r in rejected) == sum(s.samples_rejected.values())
    assert all(r["reason"] and "position" in r for r in rejected)


def test_multi_turn_expansion_split_grouping_and_gold(tmp_path: Path):
    src = str(tmp_path / "toolace.jsonl")
    write(SynthConfig(n=300, seed=3, followup_rate=0.8), src, "toolace")
    out = tmp_path / "out"
    stats = prepare(
        PrepareConfig(
            sources=[("toolace", src)],
            out=str(out),
            val_fraction=0.3,
            seed=5,
            no_call_samples=True,
            progress=False,
        )
    )
    s = stats["toolace"]
    assert s.records_in == 300 and s.samples_produced > 300  # dialogues expand into several steps
    train, val = read_jsonl(str(out / "train.jsonl")), read_jsonl(str(out / "val.jsonl"))
    sides: dict[str, set[str]] = {}
    for side, samples in (("train", train), ("val", val)):
        for x in samples:
            sides.setdefault(x.id.rsplit(":", 1)[0], set()).add(side)
    assert all(len(v) == 1 for v in sides.values())  # every dialogue on one side only
    assert any(x.category == "multi_step" for x in train + val)
    for template in ("tool_n1", "r2if", "python"):
        report = validate_path(str(out), template)
        assert report.ok, report.failures[:3]
    again = tmp_path / "again"
    prepare(
        PrepareConfig(
            sources=[("toolace", src)],
            out=str(again),
            val_fraction=0.3,
            seed=5,
            no_call_samples=True,
            progress=False,
        )
    )
    assert (again / "val.jsonl").read_text() == (out / "val.jsonl").read_text()


def test_split_is_seeded():
    groups = [f"g{i}" for i in range(2000)]
    val = [g for g in groups if split_of(g, 0, 0.1) == "val"]
    assert 120 < len(val) < 280
    assert val != [g for g in groups if split_of(g, 1, 0.1) == "val"]


def test_irrelevance_augmentation_removes_answer_tools(tmp_path: Path):
    src = _write(tmp_path / "in.jsonl", [_unique_good(i) for i in range(20)])
    prepare(
        PrepareConfig(
            sources=[("xlam", src)],
            out=str(tmp_path / "o"),
            irrelevance_augment=1.0,
            val_fraction=0.0,
            progress=False,
        )
    )
    samples = read_jsonl(str(tmp_path / "o" / "train.jsonl"))
    aug = [s for s in samples if s.meta.get("augmented") == "irrelevance"]
    assert len(aug) == 20
    assert all(
        s.answer == [] and "get_weather" not in s.tool_names and s.category == "irrelevance" for s in aug
    )


@pytest.mark.parametrize(
    "content, match",
    [
        (b"not json at all\n" + json.dumps(GOOD).encode() + b"\n", r"in\.jsonl:1: not valid JSON"),
        (random.Random(0).randbytes(4096), r"in\.jsonl:1: not valid (UTF-8|JSON)"),
        (gzip.compress(json.dumps(GOOD).encode()), r"in\.jsonl: a gzip-compressed file"),
    ],
)
def test_malformed_file_stops_run_without_partial_outputs(tmp_path: Path, content, match):
    """A file whose first record is not JSON text (another format, binary, compressed) is refused."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(content)
    with pytest.raises(DataFileError, match=match):
        prepare(PrepareConfig(sources=[("xlam", str(src))], out=str(tmp_path / "o"), progress=False))
    assert not (tmp_path / "o" / "train.jsonl").exists()


def _strict_json(line: str) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(name)

    return json.loads(line, parse_constant=refuse)


@pytest.mark.parametrize("reason, level, hostile", HOSTILE)
def test_one_hostile_record_is_rejected_and_the_run_goes_on(tmp_path: Path, reason, level, hostile):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join([_line(_unique_good(0)), hostile, _line(_unique_good(1))]) + b"\n")
    out = tmp_path / "out"
    st_ = prepare(PrepareConfig(sources=[("xlam", str(src))], out=str(out), progress=False))["xlam"]
    assert st_.records_in == 3 and st_.records_kept == 2 and dict(st_.records_rejected) == {reason: 1}
    assert st_.samples_kept == 2 and dict(st_.samples_rejected) == ({reason: 1} if level == "sample" else {})
    (rej,) = [_strict_json(x) for x in (out / "rejected.jsonl").read_text().splitlines()]
    assert rej["reason"] == reason and rej["level"] == level
    assert rej["position"] == {"file": str(src), "line": 2} and rej["detail"]
    kept = read_jsonl(str(out / "train.jsonl")) + read_jsonl(str(out / "val.jsonl"))
    assert sorted(s.messages[0]["content"] for s in kept) == [f"Weather in city number {i}?" for i in (0, 1)]
    saved = json.loads((out / "stats.json").read_text())["sources"]["xlam"]
    assert saved["records_rejected"] == {reason: 1}


def test_hostile_array_element_and_canonical_record_are_rejected(tmp_path: Path):
    arr = tmp_path / "in.json"
    arr.write_bytes(b"[" + b",".join([_line(_unique_good(0)), DEEP, _line(_unique_good(1))]) + b"]")
    canonical = tmp_path / "c.jsonl"
    good = Sample("c1", "x", "simple", [{"role": "user", "content": "q"}], [{"name": "f"}], [{"name": "f"}])
    bad = {**good.to_dict(), "id": "c2", "meta": [1, 2]}
    nan = good.to_dict()
    nan.update(id="c3", answer=[{"name": "f", "arguments": {"a": float("nan")}}])
    canonical.write_text("\n".join([good.to_json(), json.dumps(bad), json.dumps(nan)]) + "\n")
    sources = [("xlam", str(arr)), ("jsonl", str(canonical))]
    stats = prepare(PrepareConfig(sources=sources, out=str(tmp_path / "o"), progress=False))
    assert dict(stats["xlam"].records_rejected) == {"too_deep": 1} and stats["xlam"].records_kept == 2
    assert dict(stats["jsonl"].records_rejected) == {"schema_error": 1, "non_finite_number": 1}
    assert stats["jsonl"].records_kept == 1
    rejected = [_strict_json(x) for x in (tmp_path / "o" / "rejected.jsonl").read_text().splitlines()]
    assert {r["position"].get("index", r["position"].get("line")) for r in rejected} == {1, 2, 3}
    assert any("sample_text" in r and "NaN" in r["sample_text"] for r in rejected)  # kept, as text


def test_unexpected_exception_in_an_adapter_rejects_only_that_record(tmp_path: Path, monkeypatch, caplog):
    xlam = get_source("xlam")
    convert = xlam.convert

    def flaky(raw, pos):
        if pos["line"] == 2:
            raise TypeError("unhashable type: 'dict'")
        return convert(raw, pos)

    monkeypatch.setattr(xlam, "convert", flaky)
    src = _write(tmp_path / "in.jsonl", [_unique_good(i) for i in range(3)])
    st_ = prepare(PrepareConfig(sources=[("xlam", src)], out=str(tmp_path / "o"), progress=False))["xlam"]
    assert st_.records_kept == 2 and dict(st_.records_rejected) == {"conversion_error": 1}
    assert "in.jsonl:2" in caplog.text and "TypeError" in caplog.text  # logged with its traceback


def test_real_benchmarks_prepare_and_validate(tmp_path: Path, shared_data_dir: Path):
    out = tmp_path / "real"
    stats = prepare(
        PrepareConfig(
            sources=[
                ("bfcl", "package"),
                ("acebench", str(shared_data_dir / "acebench")),
                ("apibank", str(shared_data_dir / "apibank" / "level-1-api.json")),
            ],
            out=str(out),
            dedupe=False,
            check_arguments="off",
            progress=False,
        )
    )
    assert stats["bfcl"].records_rejected["unsupported_category"] > 0
    assert stats["apibank"].samples_kept == 399
    assert validate_path(str(out), "tool_n1").ok
