"""Gold self-check on hostile files: a bad line stops it with file:line and the cause, never a traceback."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooltune.data.export import to_trl_rows, to_verl_rows
from tooltune.data.validate import check_samples, validate_path
from tooltune.prompts import PromptControls
from tooltune.schema import Sample, SchemaError, read_jsonl

GOOD = Sample(
    id="s1",
    source="unit",
    category="simple",
    messages=[{"role": "user", "content": "Weather in Paris?"}],
    tools=[{"name": "get_weather", "parameters": {"properties": {"city": {"type": "string"}}}}],
    answer=[{"name": "get_weather", "arguments": {"city": "Paris"}}],
)


def _with_argument(text: str) -> bytes:
    return GOOD.to_json().replace('"Paris"}', text + "}").encode()


@pytest.mark.parametrize(
    "hostile, cause",
    [
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "nesting deeper than 100", id="deep line"),
        pytest.param(_with_argument("[" * 101 + "]" * 101), "nesting deeper than 100", id="deep arguments"),
        pytest.param(_with_argument("9" * 5000), "4300 digits", id="huge integer"),
        pytest.param(_with_argument("NaN"), "NaN is not a finite number", id="NaN"),
        pytest.param(_with_argument("-Infinity"), "-Infinity is not a finite number", id="-Infinity"),
        pytest.param(GOOD.to_json().replace("Paris", "Par\udcffis").encode("utf-8", "surrogateescape"),
                     "not valid UTF-8", id="invalid utf-8"),
    ],
)
def test_hostile_line_in_a_prepared_folder_names_file_and_line(tmp_path: Path, hostile, cause):
    (tmp_path / "train.jsonl").write_text(GOOD.to_json() + "\n")
    (tmp_path / "val.jsonl").write_bytes(GOOD.to_json().encode() + b"\n\n" + hostile + b"\n")
    with pytest.raises(SchemaError, match=rf"val\.jsonl:3: .*{cause}"):
        validate_path(str(tmp_path))


@pytest.mark.parametrize(
    "content, cause",
    [
        (gzip.compress(GOOD.to_json().encode()), "gzip-compressed: decompress it first"),
        (bytes(range(128, 256)) * 32, "not valid UTF-8"),
    ],
)
def test_binary_file_is_refused_naming_it(tmp_path: Path, content, cause):
    path = tmp_path / "data.jsonl"
    path.write_bytes(content)
    with pytest.raises(SchemaError, match=rf"data\.jsonl:1: .*{cause}"):
        validate_path(str(path))


def test_good_file_still_passes(tmp_path: Path):
    path = tmp_path / "ok.jsonl"
    path.write_text(GOOD.to_json() + "\n")
    report = validate_path(str(path))
    assert report.ok and report.total == 1


# --- any sample-shaped line: read_jsonl accepts it or names it; what it accepts renders ------------

_scalar = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
_any = st.recursive(
    _scalar, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
    max_leaves=6,
)


def _often(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly the well-typed value, sometimes any JSON value in its place."""
    return st.one_of(strategy, strategy, strategy, _any)


_call = st.fixed_dictionaries(
    {
        "name": _often(st.sampled_from(["f", "g"])),
        "arguments": _often(st.dictionaries(st.text(max_size=3), _any)),
    }
)
_property = st.fixed_dictionaries(
    {}, optional={"type": _any, "enum": _any, "items": _any, "description": _any, "default": _any}
)
_tool = st.fixed_dictionaries(
    {"name": _often(st.sampled_from(["f", "g"]))},
    optional={
        "description": _any,
        "parameters": _often(
            st.fixed_dictionaries(
                {},
                optional={
                    "properties": _often(st.dictionaries(st.text(max_size=3), _often(_property), max_size=3)),
                    "required": _often(st.lists(st.text(max_size=3), max_size=2)),
                    "additionalProperties": _any,
                },
            )
        ),
    },
)
_message = st.fixed_dictionaries(
    {"role": _often(st.sampled_from(["system", "user", "assistant", "tool"])), "content": _often(st.text())},
    optional={"tool_calls": _often(st.lists(_call, max_size=2)), "reasoning": _any, "name": _any},
)
_sample = st.fixed_dictionaries(
    {
        "id": _often(st.text(min_size=1, max_size=4)),
        "category": _often(st.sampled_from(["simple", "multiple", "irrelevance", "multi_step"])),
        "messages": _often(st.lists(_message, max_size=3)),
        "tools": _often(st.lists(_tool, max_size=2)),
        "answer": _often(st.lists(_call, max_size=2)),
    },
    optional={"meta": _any, "source": _any},
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_sample)
def test_any_sample_shaped_line_is_read_or_named_and_what_is_read_renders(tmp_path_factory, record):
    path = tmp_path_factory.mktemp("fuzz") / "x.jsonl"
    path.write_text(json.dumps(record) + "\n")
    try:
        samples = read_jsonl(str(path))
    except SchemaError as e:
        assert str(e).startswith(f"{path}:1: ")
        return
    logging.disable(logging.WARNING)  # the reward logs parser failures on odd values; those are not errors
    try:
        for template in ("tool_n1", "r2if"):
            check_samples(samples, template)
            to_trl_rows(samples, PromptControls(template, history="context"))
            to_verl_rows(samples, template)
    finally:
        logging.disable(logging.NOTSET)


def test_validation_streams_a_large_file(tmp_path: Path) -> None:
    """Memory is that of one sample, not of the file: all samples in a list took 1.7 GB on 195k samples."""
    import tracemalloc

    from tooltune.data.synthetic import SynthConfig, write

    path = tmp_path / "big.jsonl"
    write(SynthConfig(n=3000, seed=0), str(path), "canonical")
    size = path.stat().st_size  # about 5 MB
    tracemalloc.start()
    try:
        report = validate_path(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.ok and report.total == 3000
    assert peak < size / 5, f"validation held {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB file"


def test_a_report_keeps_the_first_failures_and_counts_them_all() -> None:
    bad = Sample(id="b", source="unit", category="simple", messages=[{"role": "user", "content": "q"}],
                 tools=[{"name": "f(x)", "parameters": {}}], answer=[{"name": "f(x)", "arguments": {"a": 1}}])
    from tooltune.data.validate import ValidationReport

    report = check_samples([bad] * 5 + [GOOD], "python", ValidationReport("python", keep=2))
    assert (report.total, report.passed, report.failed, len(report.failures)) == (6, 1, 5, 2)
    assert not report.ok
