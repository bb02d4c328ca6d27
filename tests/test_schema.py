import json

import pytest

from tooltune.schema import (
    Sample,
    SchemaError,
    ToolCall,
    ToolSpec,
    calls_from_any,
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
