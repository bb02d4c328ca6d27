"""`mcp.schema`: why a tool's input schema is refused (dangling $ref, non-object, too deep, backtracking
pattern), checks that never run a server's regular expression, and calls validated without it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tooltune.environments.mcp.schema import pattern_problem, schema_problem, tool_problem, validator


def _deep(levels: int) -> dict:
    schema: dict = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize("schema, words", [
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/gone"}}}, "$ref '#/$defs/gone' that does not"),
    ({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}, "does not resolve"),
    ({"type": "array"}, "type 'array', not 'object'"),
    ("object", "a str, not a JSON-Schema object"),
    (_deep(100), "nested 201 levels deep, deeper than 64 levels"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}},
     "repeats a repetition"),
    ({"type": "object", "patternProperties": {"(x+x+)+y": {}}}, "repeats a repetition"),
    ({"type": "object", "properties": {"a": {"type": 5}}}, "not valid JSON Schema"),
])
def test_bad_schemas_are_refused_saying_why(schema, words: str):
    problem = schema_problem(schema)
    assert problem is not None and words in problem and "\n" not in problem


def test_good_schemas_pass():
    defs = {"type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    assert schema_problem(defs) is None
    dated = {"type": "object", "properties": {"d": {"type": "string", "pattern": r"^\d{4}-\d+$"}}}
    assert schema_problem(dated) is None
    assert schema_problem(_deep(20)) is None
    assert tool_problem({"name": "", "inputSchema": {}}) == "the tool has no name"


def test_patterns_are_parsed_not_run():
    assert pattern_problem("^[a-z]+(-[a-z]+)*$") is None  # a fixed item opens each repetition
    assert pattern_problem(r"^(\w+\s?)+$") is not None
    assert pattern_problem("^[a-z]+-[a-z]+$") is None
    assert "characters long" in pattern_problem("a" * 2000)


def test_a_backtracking_pattern_cannot_stall_a_call_check():
    """The validator does not run `pattern`: a 40-character argument against ^(a+)+$ (hours of
    backtracking when run) is checked at once, in a subprocess so that a regression cannot hang the
    suite."""
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}
    script = ("import json, sys; from tooltune.environments.mcp.schema import validator; "
              f"v = validator({json.dumps(json.dumps(schema))}); "
              "print(len(list(v.iter_errors({'code': 'a' * 40 + '!'}))), "
              "len(list(v.iter_errors({'code': 3}))))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1"]  # the pattern is not asserted; the type still is
    assert validator(json.dumps({"type": "object", "properties": {"a": {"type": 5}}})) is None


def test_a_call_check_never_raises_on_a_schema_it_cannot_apply():
    from tooltune.environments.mcp.task import check_call
    from tooltune.schema import ToolCall, ToolSpec

    dangling = ToolSpec("t", "", {"type": "object", "properties": {"a": {"$ref": "#/$defs/gone"}}})
    assert check_call(ToolCall("t", {"a": 1}), dangling) is None  # left to the server, logged
    pattern = {"type": "string", "pattern": "^(a+)+$"}
    typed = ToolSpec("t", "", {"type": "object", "properties": {"a": pattern}})
    assert check_call(ToolCall("t", {"a": 3}), typed) == "t: argument a: 3 is not of type 'string'"
