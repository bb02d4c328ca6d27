import json

import pytest

from tooltune.schema import (
    Sample,
    SchemaError,
    ToolCall,
    ToolSpec,
    calls_from_any,
    normalize_parameters,
    read_jsonl,
    type_to_schema,
    write_jsonl,
)


@pytest.mark.parametrize(
    "src, schema, optional",
    [
        ("str", {"type": "string"}, False),
        ("str, optional", {"type": "string"}, True),
        ("int", {"type": "integer"}, False),
        ("float", {"type": "number"}, False),
        ("bool", {"type": "boolean"}, False),
        ("List[int]", {"type": "array", "items": {"type": "integer"}}, False),
        ("List[Dict[str, Any]], optional", {"type": "array", "items": {"type": "object"}}, True),
        ("Dict[str, int]", {"type": "object", "additionalProperties": {"type": "integer"}}, False),
        ("Optional[str]", {"type": "string"}, True),
        ("Union[int, str]", {"anyOf": [{"type": "integer"}, {"type": "string"}]}, False),
        ("dict", {"type": "object"}, False),
        ("tuple", {"type": "array"}, False),
        ("any", {}, False),
        ("String", {"type": "string"}, False),
        ("Callable", {"x-source-type": "Callable"}, False),
    ],
)
def test_type_normalization(src, schema, optional):
    assert type_to_schema(src) == (schema, optional)


def test_xlam_parameters_become_json_schema():
    params = {
        "city": {"type": "str", "description": "City name"},
        "days": {"type": "int, optional", "description": "Days", "default": 3},
        "ids": {"type": "List[int]", "description": "ids"},
    }
    out = normalize_parameters(params)
    assert out["type"] == "object"
    assert out["properties"]["days"] == {"type": "integer", "description": "Days", "default": 3}
    assert out["properties"]["ids"]["items"] == {"type": "integer"}
    assert out["required"] == ["city", "ids"]


def test_bfcl_dict_type_and_nested_properties():
    params = {
        "type": "dict",
        "properties": {
            "loc": {"type": "dict", "properties": {"lat": {"type": "float"}}, "required": ["lat"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["loc"],
    }
    out = normalize_parameters(params)
    assert out["properties"]["loc"]["type"] == "object"
    assert out["properties"]["loc"]["properties"]["lat"] == {"type": "number"}
    assert out["required"] == ["loc"]


def test_toolspec_from_source_shapes():
    api_bank = {
        "name": "QueryStock",
        "description": "stock",
        "input_parameters": {"symbol": {"type": "str", "description": "s"}},
    }
    t = ToolSpec.from_dict(api_bank)
    assert t.required == ["symbol"] and t.properties["symbol"]["type"] == "string"
    openai = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
    }
    assert ToolSpec.from_dict(openai).name == "f"
    with pytest.raises(SchemaError, match=r"tool\.name"):
        ToolSpec.from_dict({"description": "no name"})


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
