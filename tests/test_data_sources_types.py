"""Source type strings and tool shapes -> canonical JSON-Schema ToolSpecs."""

import pytest

from tooltune.data.sources.types import normalize_parameters, tool_spec_from_source, type_to_schema
from tooltune.schema import SchemaError


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
    t = tool_spec_from_source(api_bank)
    assert t.required == ["symbol"] and t.properties["symbol"]["type"] == "string"
    openai = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
    }
    assert tool_spec_from_source(openai).name == "f"
    with pytest.raises(SchemaError, match=r"tool\.name"):
        tool_spec_from_source({"description": "no name"})


