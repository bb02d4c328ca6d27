"""Source adapters: hand-made raw records with the hard cases, and the real benchmark files."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooltune.data.sources import DataFileError, RecordError, Rejection, get_source
from tooltune.data.sources.base import as_record_error
from tooltune.data.sources.reading import iter_file
from tooltune.prompts import python_calls
from tooltune.schema import RecordValueError, Sample, ToolCall

xlam = get_source("xlam")
toolace = get_source("toolace")

WEATHER = {
    "name": "get_weather",
    "description": "Weather",
    "parameters": {
        "city": {"type": "str", "description": "City, State"},
        "unit": {"type": "str, optional", "default": "c"},
    },
}


def _xlam(answers, tools=(WEATHER,), query="Weather in Austin, TX?", **extra):
    return {
        "id": 7,
        "query": query,
        "answers": json.dumps(answers) if not isinstance(answers, str) else answers,
        "tools": json.dumps(list(tools)),
        **extra,
    }


def test_xlam_converts_answer_and_normalizes_types():
    (s,) = xlam.convert(_xlam([{"name": "get_weather", "arguments": {"city": "Austin, TX"}}]), {"index": 0})
    assert s.id == "xlam:7" and s.category == "simple"
    assert s.answer == [ToolCall("get_weather", {"city": "Austin, TX"})]
    params = s.tools[0].parameters
    assert params["properties"]["city"]["type"] == "string" and params["required"] == ["city"]


def test_xlam_parallel_and_predecoded_fields():
    raw = {
        "query": "q",
        "answers": [
            {"name": "get_weather", "arguments": {"city": "A"}},
            {"name": "get_weather", "arguments": {"city": "B"}},
        ],
        "tools": [WEATHER],
    }
    (s,) = xlam.convert(raw, {"line": 3})
    assert s.category == "parallel" and s.id == "xlam:3"


@pytest.mark.parametrize(
    "raw, reason",
    [
        (_xlam("[{'name': 'x'}]"), "answer_json_error"),
        ({"query": "q", "answers": "[]", "tools": "[{"}, "tools_json_error"),
        ({"query": "q", "tools": "[]"}, "missing_field"),
        (_xlam([{"name": "", "arguments": {}}]), "answer_schema_error"),
        (_xlam([], query="   "), "empty_query"),
        (_xlam([], tools=[WEATHER, {**WEATHER, "description": "other"}]), "formatting_inconsistent"),
        ("not an object", "bad_record_type"),
    ],
)
def test_xlam_malformed_records_raise_with_reason(raw, reason):
    with pytest.raises(RecordError) as e:
        xlam.convert(raw, {"index": 0})
    assert e.value.reason == reason and e.value.field


HARD_TOOLS = [
    {
        "name": "Get Manager Placeholder Image",
        "description": "d",
        "parameters": {"type": "dict", "properties": {"sport": {"type": "string"}}, "required": ["sport"]},
    },
    {
        "name": "math.factorial",
        "description": "d",
        "parameters": {"type": "dict", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    },
    {
        "name": "note",
        "description": "d",
        "parameters": {
            "type": "dict",
            "properties": {"text": {"type": "string"}, "items": {"type": "array"}},
            "required": [],
        },
    },
]


def _toolace(conversations, system_extra="", tools=HARD_TOOLS):
    system = (
        "You are an expert in composing functions. You are given a question and a set of possible "
        "functions.\n"
        f"{toolace.TOOLS_MARKER}\n{json.dumps(tools)}. \nShould you decide to return the function call(s)."
        f"\n{system_extra}"
    )
    return {"system": system, "conversations": [{"from": f, "value": v} for f, v in conversations]}


def test_toolace_hard_call_strings():
    call = (
        '[Get Manager Placeholder Image(sport="football"), math.factorial(n=5), '
        'note(text="Call Bob (re: budget, Q3) \\"now\\"", items=[[1, 2], ("a,b", \'c)\')])]'
    )
    raw = _toolace([("user", "hi"), ("assistant", call)])
    (s,) = toolace.convert(raw, {"line": 1})
    assert [c.name for c in s.answer] == ["Get Manager Placeholder Image", "math.factorial", "note"]
    assert s.answer[2].arguments == {
        "text": 'Call Bob (re: budget, Q3) "now"',
        "items": [[1, 2], ["a,b", "c)"]],
    }
    assert s.category == "parallel_multiple"


def test_toolace_segments_dialogue_into_steps_with_history():
    raw = _toolace(
        [
            ("user", "Factorial of 5, please."),
            ("assistant", "[math.factorial(n=5)]"),
            ("tool", '[{"name": "math.factorial", "results": {"value": 120}}]'),
            ("assistant", "It is 120."),
            ("user", "Now note it."),
            ("assistant", "[note(text='120')]"),
            ("tool", '{"name": "note", "results": "ok"}'),
            ("assistant", "Noted."),
        ],
        system_extra="The current date is 2024-05-01.",
    )
    steps = toolace.convert(raw, {"line": 9})
    assert [s.id for s in steps] == ["toolace:9:0", "toolace:9:2"]
    first, second = steps
    assert first.category == "multiple"  # one call among three candidate tools
    assert second.category == "multi_step"
    roles = [m["role"] for m in second.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert second.messages[0]["content"] == "The current date is 2024-05-01."
    assert second.messages[2]["tool_calls"] == [{"name": "math.factorial", "arguments": {"n": 5}}]
    assert second.messages[3]["name"] == "math.factorial"
    with_text = toolace.convert(raw, {"line": 9}, no_call_samples=True)
    no_call = [s for s in with_text if not s.answer]
    assert len(no_call) == 2 and all(s.meta["no_call"] == "text_turn" for s in no_call)


def test_toolace_bad_call_stops_dialogue_with_rejection():
    raw = _toolace(
        [
            ("user", "a"),
            ("assistant", "[math.factorial(n=5)]"),
            ("tool", "{}"),
            ("user", "b"),
            ("assistant", "[note(text='unclosed)]"),
            ("user", "c"),
            ("assistant", "[math.factorial(n=1)]"),
        ]
    )
    out = toolace.convert(raw, {"line": 1})
    assert isinstance(out[0], Sample) and isinstance(out[1], Rejection)
    assert out[1].reason == "call_parse_error" and len(out) == 2


@pytest.mark.parametrize(
    "raw, reason",
    [
        ({"system": "no marker here", "conversations": []}, "tools_not_found"),
        ({"system": f"{toolace.TOOLS_MARKER} [{{bad json", "conversations": []}, "tools_json_error"),
        (_toolace([("assistant", "[note()]")]), "formatting_inconsistent"),
        (_toolace([("user", "a"), ("robot", "b")]), "bad_role"),
        ({"system": f"{toolace.TOOLS_MARKER} []"}, "missing_field"),
    ],
)
def test_toolace_malformed_records(raw, reason):
    with pytest.raises(RecordError) as e:
        toolace.convert(raw, {"line": 1})
    assert e.value.reason == reason


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _text,
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), kids, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), _value, max_size=4))
def test_toolace_python_calls_round_trip(args):
    """Any JSON-like arguments rendered as a ToolACE call string decode back to the same call."""
    call = ToolCall("Get Manager Placeholder Image", args)
    raw = _toolace([("user", "x"), ("assistant", python_calls([call]))])
    (s,) = toolace.convert(raw, {"line": 1})
    assert s.answer == [call]


# --- file readers ---------------------------------------------------------------------------------


def test_jsonl_not_json_names_file_and_line(tmp_path: Path):
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(_xlam([])) + "\n{oops\n")
    with pytest.raises(DataFileError, match=r"x\.jsonl:2: not valid JSON"):
        list(xlam.read(str(p)))


def test_wrong_format_file_names_missing_field(tmp_path: Path):
    p = tmp_path / "toolace_as_xlam.json"
    p.write_text(json.dumps([_toolace([("user", "a")])]))
    with pytest.raises(DataFileError, match=r"toolace_as_xlam\.json\[0\]: field 'query' missing"):
        list(xlam.read(str(p)))


def test_array_file_bad_json_names_line(tmp_path: Path):
    p = tmp_path / "a.json"
    p.write_text('[\n{"query": "q"},\n{bad}\n]')
    with pytest.raises(DataFileError, match=r"a\.json:3"):
        list(iter_file(str(p)))


DEEP = "[" * 100_000 + "]" * 100_000
"""A JSON value far too deep for the decoder (RecursionError inside json)."""
GOOD_LINE = json.dumps(_xlam([{"name": "get_weather", "arguments": {"city": "X"}}]))
HOSTILE = {
    "too_deep": DEEP.encode(),
    "huge_integer": b'{"query": "q", "answers": "[]", "tools": "[]", "n": ' + b"9" * 5000 + b"}",
    "invalid_utf8": b'{"query": "\xff\xfe", "answers": "[]", "tools": "[]"}',
    "json_error": b'{"query": "truncated',
}


@pytest.mark.parametrize("reason", list(HOSTILE))
def test_jsonl_hostile_line_is_one_unreadable_record(tmp_path: Path, reason):
    p = tmp_path / "h.jsonl"
    p.write_bytes(GOOD_LINE.encode() + b"\n" + HOSTILE[reason] + b"\n" + GOOD_LINE.encode() + b"\n")
    recs = list(xlam.read(str(p), lenient=True))
    assert [r.position["line"] for r in recs] == [1, 2, 3]
    bad = recs[1]
    assert bad.data is None and bad.error.reason == reason and bad.text
    assert recs[0].error is None and recs[2].data == json.loads(GOOD_LINE)
    with pytest.raises(DataFileError, match=r"h\.jsonl:2: "):  # strict readers stop, naming line and cause
        list(xlam.read(str(p)))


def test_array_hostile_elements_are_unreadable_records(tmp_path: Path):
    p = tmp_path / "a.json"
    good = GOOD_LINE.encode()
    elements = [good, HOSTILE["too_deep"], b"9" * 5000, HOSTILE["invalid_utf8"], good]
    p.write_bytes(b"[\n" + b",\n".join(elements) + b"\n]\n")
    recs = list(iter_file(str(p), ("query",), lenient=True))
    assert [r.position["index"] for r in recs] == [0, 1, 2, 3, 4]
    assert [r.error.reason if r.error else None for r in recs] == [
        None, "too_deep", "huge_integer", "invalid_utf8", None
    ]
    assert recs[4].data == json.loads(GOOD_LINE)
    with pytest.raises(DataFileError, match=r"a\.json\[1\]: nesting deeper"):
        list(iter_file(str(p), ("query",)))


@pytest.mark.parametrize(
    "content, match",
    [
        (gzip.compress(GOOD_LINE.encode()), r"x\.jsonl: a gzip-compressed file"),
        (random.Random(0).randbytes(4096), r"x\.jsonl:1: not valid (UTF-8|JSON).*not a JSON, JSONL"),
        (b"{oops\n" + GOOD_LINE.encode(), r"x\.jsonl:1: not valid JSON .*not a JSON, JSONL or parquet"),
    ],
)
def test_binary_or_foreign_file_is_refused_naming_it(tmp_path: Path, content, match):
    p = tmp_path / "x.jsonl"
    p.write_bytes(content)
    with pytest.raises(DataFileError, match=match):
        list(xlam.read(str(p), lenient=True))


def test_field_json_refused_for_hostile_values():
    cases = {
        "non_finite_number": '[{"name": "get_weather", "arguments": {"city": NaN}}]',
        "too_deep": DEEP,
        "huge_integer": "[" + "1" * 5000 + "]",
        "answer_json_error": "[{",
    }
    for reason, answers in cases.items():
        with pytest.raises(RecordError) as e:
            xlam.convert(_xlam(answers), {"line": 1})
        assert e.value.reason == reason and e.value.field.startswith("answers"), (reason, e.value)
    nan_tool = '[{"name": "f", "parameters": {"a": {"default": Infinity}}}]'
    for tools, reason in [(DEEP, "too_deep"), (nan_tool, "non_finite_number")]:
        conversations = [{"from": "user", "value": "q"}]
        raw = {"system": f"{toolace.TOOLS_MARKER}\n{tools}", "conversations": conversations}
        with pytest.raises(RecordError) as e:
            toolace.convert(raw, {"line": 1})
        assert e.value.reason == reason


def test_deeply_nested_type_string_is_a_tool_schema_error():
    tool = {**WEATHER, "parameters": {"city": {"type": "List[" * 5000 + "str" + "]" * 5000}}}
    with pytest.raises(RecordError) as e:
        xlam.convert(_xlam([], tools=[tool]), {"line": 1})
    assert e.value.reason == "tool_schema_error" and "nests 5000 deep" in e.value.message


def test_as_record_error_maps_what_a_hostile_record_raises():
    assert as_record_error(RecursionError()).reason == "too_deep"
    try:
        int("9" * 5000)
    except ValueError as huge:
        assert as_record_error(huge).reason == "huge_integer"
    assert as_record_error(RecordValueError("non_finite_number", "answers[0]", "NaN")).field == "answers[0]"
    err = as_record_error(TypeError("unhashable type: 'dict'"))
    assert err.reason == "conversion_error" and "TypeError" in err.message


def test_parquet_reader(tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [_xlam([{"name": "get_weather", "arguments": {"city": "X"}}]) for _ in range(3)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "x.parquet")
    recs = list(xlam.read(str(tmp_path / "x.parquet")))
    assert [r.position["index"] for r in recs] == [0, 1, 2]
    assert all(xlam.convert(r.data, r.position)[0].answer[0].arguments == {"city": "X"} for r in recs)


def test_hub_offline_error_is_explained(monkeypatch):
    from tooltune.data.sources import SourceUnavailable

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(SourceUnavailable, match="--input"):
        list(xlam.read("hf:Salesforce/xlam-function-calling-60k"))


def test_sources_are_the_adapter_modules_and_an_unknown_one_names_the_closest():
    from tooltune.config import UnknownName
    from tooltune.data.sources import ADAPTER_MODULES, SOURCES

    assert SOURCES.names() == ADAPTER_MODULES
    assert all(name == SOURCES[name].NAME for name in SOURCES)
    closest = r"sources: unknown source 'toolrll' \(did you mean toolrl\?\); registered: "
    with pytest.raises(UnknownName, match=closest):
        get_source("toolrll")


# --- real benchmark files -------------------------------------------------------------------------


def _convert_all(name, spec):
    src = get_source(name)
    samples, reasons = [], {}
    for rec in src.read(spec):
        try:
            samples.extend(x for x in src.convert(rec.data, rec.position) if isinstance(x, Sample))
        except RecordError as e:
            reasons[e.reason] = reasons.get(e.reason, 0) + 1
    return samples, reasons


def test_bfcl_package_data():
    samples, reasons = _convert_all("bfcl", "package")
    by_id = {s.meta["raw_id"]: s for s in samples}
    assert set(reasons) <= {"unsupported_category", "no_ground_truth"}
    assert {s.category for s in samples} == {
        "simple",
        "multiple",
        "parallel",
        "parallel_multiple",
        "irrelevance",
    }
    s0 = by_id["simple_python_0"]
    # "unit": ["units", ""] is optional -> omitted; others take the first acceptable value
    assert s0.answer == [ToolCall("calculate_triangle_area", {"base": 10, "height": 5})]
    assert s0.meta["acceptable"][0]["calculate_triangle_area"]["unit"] == ["units", ""]
    nested = by_id["live_multiple_0-0-0"].answer[0].arguments["new_preferences"]
    assert nested["size"] == "large" and nested["special_instructions"] == "served boiling hot"
    assert by_id["irrelevance_0"].answer == []


def test_acebench_real_files(shared_data_dir: Path):
    samples, reasons = _convert_all("acebench", str(shared_data_dir / "acebench"))
    assert reasons == {"unsupported_category": 50}  # the 20 + 30 agent tasks are judged on state
    by_id = {s.meta["raw_id"]: s for s in samples}
    par = by_id["normal_single_turn_parallel_function_2"]
    assert [c.name for c in par.answer] == [
        "market_insight_predict_trends"
    ] * 4  # _1.._4 suffixes mapped back
    assert "alternatives" in by_id["normal_atom_bool_11"].meta
    assert (
        by_id["special_irrelevant_0"].answer == [] and by_id["special_irrelevant_0"].category == "irrelevance"
    )
    assert all(s.messages[-1]["role"] == "user" for s in samples)
    assert any(m.get("tool_calls") for s in samples for m in s.messages)  # "system: [f(...)]" history lines


def test_apibank_real_files(shared_data_dir: Path):
    for level, n in (("level-1-api.json", 399), ("level-2-api.json", 135)):
        samples, reasons = _convert_all("apibank", str(shared_data_dir / "apibank" / level))
        assert reasons == {} and len(samples) == n
    samples, _ = _convert_all("apibank", str(shared_data_dir / "apibank" / "level-1-api.json"))
    quoted = [
        s for s in samples if s.meta["expected_output"].count("='[") and s.answer[0].name == "QueryMeeting"
    ]
    assert quoted and isinstance(quoted[0].answer[0].arguments["attendees"], list)
    assert all(s.messages[-1]["role"] in ("user", "tool") for s in samples)
    lvl2, _ = _convert_all("apibank", str(shared_data_dir / "apibank" / "level-2-api.json"))
    # level 2 lists only ToolSearcher; the APIs it finds join the candidates from its results
    found = [s for s in lvl2 if s.answer[0].name != "ToolSearcher" and s.answer[0].name in s.tool_names]
    assert found and all(s.category == "multi_step" for s in found)


def test_toolace_text_around_a_call_is_a_formatting_inconsistency():
    raw = _toolace([("user", "a"), ("assistant", "Sure! [math.factorial(n=5)] is what I will call.")])
    (rej,) = toolace.convert(raw, {"line": 1})
    assert isinstance(rej, Rejection) and rej.reason == "formatting_inconsistent"


def test_a_hub_dataset_on_an_offline_machine_fails_at_once_with_the_advice(monkeypatch):
    import socket

    from tooltune.data.sources import SourceUnavailable

    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(SourceUnavailable, match=rf"cannot be reached.*127\.0\.0\.1:{port}.*--input"):
        list(xlam.read("hf:Salesforce/xlam-function-calling-60k"))
