"""A tool's JSON schema as a Python signature that `transformers.utils.get_json_schema` reads back."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from tooltune.integrations.signatures import method_name, parameter_name, python_tool, type_hint
from tooltune.schema import ToolSpec


def test_names_that_are_not_identifiers_are_mapped_uniquely():
    taken: set[str] = set()
    assert [method_name(n, taken) for n in ("send-mail", "send_mail", "reset", "2fa", "_x", "class")] == [
        "send_mail", "send_mail_2", "tool_reset", "tool_2fa", "tool__x", "tool_class"]
    names: set[str] = set()
    assert [parameter_name(n, names) for n in ("from", "a b", "self", "1st")] == [
        "from_", "a_b", "self_", "p_1st"]


def test_type_hints_follow_the_json_types():
    assert type_hint({"type": "string"}) is str and type_hint({"type": "number"}) is float
    assert type_hint({"type": "array", "items": {"type": "integer"}}) == list[int]
    assert type_hint({"type": ["string", "null"]}) == Optional[str]  # noqa: UP045
    assert type_hint({"type": ["string", "integer"]}) == Union[str, int]  # noqa: UP007
    assert type_hint({"enum": ["a", "b"], "type": "string"}) == Literal["a", "b"]
    assert type_hint({"anyOf": []}) is Any and type_hint("nonsense") is Any


def test_get_json_schema_reads_back_the_task_schema():
    from transformers.utils import get_json_schema  # deferred: heavy

    spec = ToolSpec("book", "Book a  room.\nArgs: not a section", {"type": "object", "required": ["city"],
                    "properties": {"city": {"type": "string", "description": "Where."},
                                   "nights": {"type": "integer"},
                                   "guests": {"type": "array", "items": {
                                       "type": "object", "properties": {"name": {"type": "string"}}}}}})
    tool = python_tool(spec, set())

    def book(self: Any, **kwargs: Any) -> str:
        return ""

    book.__signature__, book.__annotations__, book.__doc__ = tool.signature, tool.annotations, tool.doc
    schema = get_json_schema(book)["function"]
    assert schema["name"] == "book" and schema["description"] == "Book a room. Args : not a section"
    props = schema["parameters"]["properties"]
    assert props["city"] == {"type": "string", "description": "Where."}
    assert props["nights"]["type"] == "integer" and props["nights"]["nullable"]
    assert props["guests"]["type"] == "array" and '"name"' in props["guests"]["description"]
    assert schema["parameters"]["required"] == ["city"]
