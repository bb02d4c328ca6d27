"""The schema check every environment runs before a call: JSON types (a list of types, null, booleans
kept apart from numbers) and enums, at the schema's top level; the registry's error for an unknown name."""

from __future__ import annotations

import pytest

from tooltune.config import UnknownName
from tooltune.environments import make_environment
from tooltune.environments.base import check_arguments
from tooltune.schema import ToolCall, ToolSpec

SPEC = ToolSpec("f", "A tool.", {"type": "object", "properties": {
    "text": {"type": ["string", "null"]}, "n": {"type": "integer"}, "flag": {"type": "boolean"},
    "x": {"type": "number"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": []})


@pytest.mark.parametrize("arguments", [{"text": None}, {"text": "s"}, {"n": 3}, {"flag": True}, {"x": 1.5},
                                       {"x": 2}, {"unit": "c"}])
def test_values_of_a_declared_type_pass(arguments: dict) -> None:
    assert check_arguments(ToolCall("f", arguments), SPEC) is None


@pytest.mark.parametrize(("arguments", "why"), [
    ({"text": 1}, "must be ['string', 'null'], got int"), ({"n": True}, "must be integer, got bool"),
    ({"flag": 1}, "must be boolean, got int"), ({"x": False}, "must be number, got bool"),
    ({"unit": "k"}, "must be one of ['c', 'f']"), ({"other": 1}, "unknown argument(s) ['other']"),
])
def test_values_outside_the_schema_are_refused_naming_why(arguments: dict, why: str) -> None:
    assert why in (check_arguments(ToolCall("f", arguments), SPEC) or "")


def test_an_unknown_environment_is_refused_naming_the_closest() -> None:
    with pytest.raises(UnknownName, match=r"^environment: unknown environment 'mpc' \(did you mean mcp\?\); "
                                          r"registered: acebench, bfcl, mcp, synthetic_chain$"):
        make_environment("mpc")
    with pytest.raises(ValueError):  # what callers written against the former ValueError catch
        make_environment("mpc")
