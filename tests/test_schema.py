import gzip
import json
import random
import re

import pytest

from tooltune.schema import (
    MAX_RECORD_DEPTH,
    RecordValueError,
    Sample,
    SchemaError,
    ToolCall,
    ToolSpec,
    calls_from_any,
    dumps_record,
    find_fault,
    loads_record,
    read_jsonl,
    write_jsonl,
)


def test_toolspec_from_dict_is_canonical_only():
    props = {"a": {"type": "string"}}
    t = ToolSpec.from_dict({"name": "f", "parameters": {"type": "object", "properties": props}})
    assert t.parameters == {"type": "object", "properties": props, "required": []}
    empty = {"type": "object", "properties": {}, "required": []}
    assert ToolSpec.from_dict({"name": "g"}).parameters == empty
    with pytest.raises(SchemaError, match=r"tool\.name"):
        ToolSpec.from_dict({"description": "no name"})
    with pytest.raises(SchemaError, match=r"tool\.parameters"):
        ToolSpec.from_dict({"name": "f", "parameters": "str"})


def test_calls_from_any_accepts_every_ground_truth_shape():
    gold = [ToolCall("f", {"a": 1})]
    assert calls_from_any(gold) == gold
    assert calls_from_any([{"name": "f", "arguments": {"a": 1}}]) == gold
    assert calls_from_any('[{"name": "f", "arguments": {"a": 1}}]') == gold
    assert calls_from_any({"name": "f", "arguments": '{"a": 1}'}) == gold
    assert calls_from_any("") == [] and calls_from_any(None) == []
    with pytest.raises(SchemaError, match=r"answer\[0\]\.name"):
        calls_from_any([{"arguments": {}}])
    with pytest.raises(SchemaError, match="not valid JSON"):
        calls_from_any("[{")


def _sample(**kw):
    base = dict(
        id="s1",
        source="unit",
        category="simple",
        messages=[
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"name": "f", "arguments": {}}],
                "reasoning": "r",
            },
            {"role": "tool", "content": "{}", "name": "f"},
        ],
        tools=[{"name": "f", "description": "", "parameters": {"type": "object", "properties": {}}}],
        answer=[{"name": "f", "arguments": {"x": 1.0, "s": "\u00e9\ud800"}}],
        meta={"acceptable": {"x": [1.0, 1]}},
    )
    base.update(kw)
    return Sample(**base)


def test_sample_roundtrips_losslessly_through_json(tmp_path):
    s = _sample()
    back = Sample.from_json(s.to_json())
    assert back == s
    assert isinstance(back.answer[0].arguments["x"], float)
    path = tmp_path / "x.jsonl"
    write_jsonl([s, s], str(path))
    assert read_jsonl(str(path)) == [s, s]


def test_sample_errors_name_the_record_and_field(tmp_path):
    with pytest.raises(SchemaError, match=r"sample 's1'\.category"):
        _sample(category="weird")
    with pytest.raises(SchemaError, match=r"messages\[0\]\.role"):
        _sample(messages=[{"role": "bot", "content": "x"}])
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_sample().to_dict()) + "\n{not json\n")
    with pytest.raises(SchemaError, match=r"bad\.jsonl:2"):
        read_jsonl(str(path))
    with pytest.raises(SchemaError, match="missing field"):
        Sample.from_dict({"id": "x"})


# --- hostile records: every bad line is a SchemaError naming file:line and the cause -----------------

DEEP = "[" * 100_000 + "]" * 100_000
"""A JSON value far too deep for the decoder (RecursionError inside json)."""


def _good_line() -> str:
    return _sample().to_json()


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _hostile(**changes) -> bytes:
    d = json.loads(_good_line())
    d["answer"][0]["arguments"].update(changes)
    return json.dumps(d).encode()


HOSTILE_LINES = {
    "deep line": (DEEP.encode(), "nesting deeper than 100"),
    "deep arguments": (
        _hostile(x=json.loads(_nested(150))),
        r"answer\[0\]\.arguments\.x.*nesting deeper than 100",
    ),
    "huge integer": (_good_line().replace('"x": 1.0', '"x": ' + "7" * 5000).encode(), "4300 digits"),
    "NaN": (_good_line().replace('"x": 1.0', '"x": NaN').encode(), "NaN is not a finite number"),
    "Infinity": (_good_line().replace('"x": 1.0', '"x": Infinity').encode(), "Infinity is not a finite"),
    "-Infinity": (_good_line().replace('"x": 1.0', '"x": -Infinity').encode(), "-Infinity is not a finite"),
    "float overflow": (_good_line().replace('"x": 1.0', '"x": 1e999').encode(), "1e999 is not a finite"),
    "invalid UTF-8": (_good_line().replace("hi", "h\udcff").encode("utf-8", "surrogateescape"), "UTF-8"),
    "not JSON": (b"{oops", "not valid JSON"),
    "meta not an object": (_good_line().replace('"meta": {', '"meta": [1], "m": {').encode(), r"\.meta"),
    "properties a list": (
        _good_line().replace('"properties": {}', '"properties": [1]').encode(),
        r"tools\[0\]\.parameters\.properties",
    ),
    "deep string arguments": (
        _good_line().replace('{"x": 1.0, "s": "\\u00e9\\ud800"}', json.dumps('{"x": ' + DEEP + "}")).encode(),
        r"arguments: nesting deeper than 100",
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE_LINES))
def test_read_jsonl_names_file_line_and_cause_of_a_hostile_line(tmp_path, name):
    line, cause = HOSTILE_LINES[name]
    path = tmp_path / "h.jsonl"
    path.write_bytes(_good_line().encode() + b"\n" + line + b"\n" + _good_line().encode() + b"\n")
    with pytest.raises(SchemaError, match=r"h\.jsonl:2\b") as e:
        read_jsonl(str(path))
    assert re.search(cause, str(e.value)), str(e.value)[:300]


@pytest.mark.parametrize(
    "content, cause",
    [
        (random.Random(0).randbytes(4096), r"bin\.jsonl:1: not valid (UTF-8|JSON)"),
        (gzip.compress(b'{"id": "x"}\n'), r"bin\.jsonl:1: .*gzip-compressed"),
    ],
)
def test_read_jsonl_refuses_binary_files_naming_them(tmp_path, content, cause):
    path = tmp_path / "bin.jsonl"
    path.write_bytes(content)
    with pytest.raises(SchemaError, match=cause):
        read_jsonl(str(path))
    with pytest.raises(SchemaError, match="cannot read"):
        read_jsonl(str(tmp_path))  # a folder


def test_record_checks_bound_depth_and_refuse_non_finite_numbers():
    assert loads_record(_nested(MAX_RECORD_DEPTH)) == json.loads(_nested(MAX_RECORD_DEPTH))
    for text in (_nested(MAX_RECORD_DEPTH + 1), DEEP):
        with pytest.raises(RecordValueError, match="deeper than 100") as e:
            loads_record(text, "f")
        assert e.value.reason == "too_deep"
    assert loads_record(_nested(MAX_RECORD_DEPTH + 1), max_depth=None)  # the caller checks what it builds
    cases = [("[NaN]", "non_finite_number"), ("1" * 5000, "huge_integer"), ("[1] x", "json_error")]
    for text, reason in cases:
        with pytest.raises(RecordValueError) as e:
            loads_record(text)
        assert e.value.reason == reason
    assert loads_record("[NaN]", finite=False)[0] != 0  # raw records may hold NaN; samples may not
    deep: list = []
    inner = deep
    for _ in range(200_000):  # deeper than any recursion limit: the walk must not recurse
        inner.append([])
        inner = inner[0]
    assert find_fault(deep)[0] == "too_deep"
    with pytest.raises(RecordValueError, match=r"^s\.answer\[0\]\.arguments\.x: nan is not a finite number"):
        dumps_record({"answer": [{"arguments": {"x": float("nan")}}]}, "s")
    with pytest.raises(RecordValueError, match="too_deep|deeper than 100"):
        dumps_record(deep)
    assert dumps_record({"s": "\ud800"}) == '{"s": "\\ud800"}'  # lone surrogates escaped, as dumps_line
