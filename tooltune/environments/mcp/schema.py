"""The input schemas of an MCP server's tools, checked before any of them is used.

`tool_problem` says why one tool of a tools/list answer cannot be offered, or None. Every check is
bounded in time and depth, whatever the server sent:

- the tool is an object with a non-empty string ``name`` and an ``inputSchema`` that is a JSON-Schema
  object (``"type": "object"`` when it names a type);
- the schema is at most `MAX_DEPTH` levels deep and has at most `MAX_NODES` values in all (walked
  without recursion);
- every ``$ref`` is a local JSON pointer (``#/...``) that resolves inside the schema;
- every regular expression (``pattern`` values, ``patternProperties`` keys) compiles and has no
  unbounded repetition whose body opens with another one or with an alternation (``(a+)+``,
  ``(a|aa)*``: the shapes whose matching time grows exponentially with the input; ``(-[a-z]+)*``
  passes). Expressions are parsed, never run;
- the schema is valid for its JSON-Schema draft (`jsonschema`'s meta-schema check, which only runs on
  schemas that passed the bounds above).

`screen_tools` drops the tools with a problem from a tools/list answer, logging one line per tool that
names it and the reason; the rest of the server stays usable. `validator` is the JSON-Schema validator
`tooltune.environments.mcp.task.check_call` uses for a call's arguments; it does not assert ``pattern``
(the server checks its own patterns: no expression a server sent runs on a model's text here).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from re import _constants, _parser  # the standard library's regular-expression parser and its opcodes
from typing import Any

logger = logging.getLogger(__name__)

MAX_DEPTH = 64
"""Deepest nesting of JSON objects and lists in one tool's input schema (a property nested in a property
is two levels: its ``properties`` object and its schema)."""
MAX_NODES = 20_000
"""Most values (objects, lists and scalars) in one tool's input schema."""
MAX_PATTERN_CHARS = 1000
"""Longest regular expression a schema may carry."""


def _walk(schema: Any) -> tuple[str | None, list[str], list[str]]:
    """One bounded pass over `schema`: (the first size problem or None, its ``$ref`` values, its regular
    expressions)."""
    refs: list[str] = []
    patterns: list[str] = []
    stack: list[tuple[Any, int]] = [(schema, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"its input schema has more than {MAX_NODES} values", refs, patterns
        if depth > MAX_DEPTH:
            return f"its input schema is nested deeper than {MAX_DEPTH} levels", refs, patterns
        if isinstance(value, dict):
            ref, pattern, by_pattern = value.get("$ref"), value.get("pattern"), value.get("patternProperties")
            if isinstance(ref, str):
                refs.append(ref)
            if isinstance(pattern, str):
                patterns.append(pattern)
            if isinstance(by_pattern, dict):
                patterns.extend(by_pattern)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return None, refs, patterns


def _resolves(schema: dict[str, Any], ref: str) -> bool:
    """Whether `ref` is a local JSON pointer that names a value inside `schema`."""
    if ref == "#":
        return True
    if not ref.startswith("#/"):
        return False
    node: Any = schema
    for raw in ref[2:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return False
    return True


def _starts_ambiguous(seq: Any, c: Any) -> bool:
    """Whether a repeated body opens with an unbounded repetition or an alternation (after any groups):
    the shapes, like ``(a+)+`` and ``(a|aa)*``, in which one input splits into the repetitions in
    exponentially many ways. A body that opens with a fixed item (``(-[a-z]+)*``) does not."""
    while seq:
        op, arg = seq[0]
        if op == c.SUBPATTERN:
            seq = list(arg[-1])
            continue
        if op == c.BRANCH:
            return True
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            return arg[1] == c.MAXREPEAT or arg[1] > 100
        return False
    return False


def _nested_repeat(items: Any) -> bool:
    """Whether a parsed expression has an unbounded repetition whose body `_starts_ambiguous`."""
    c = _constants
    stack = [items]
    while stack:
        for op, arg in stack.pop():
            if op in (c.MAX_REPEAT, c.MIN_REPEAT):
                if (arg[1] == c.MAXREPEAT or arg[1] > 100) and _starts_ambiguous(list(arg[2]), c):
                    return True
                stack.append(list(arg[2]))
            elif op == c.SUBPATTERN:
                stack.append(list(arg[-1]))
            elif op == c.BRANCH:
                stack.extend(list(b) for b in arg[1])
            elif op in (c.ASSERT, c.ASSERT_NOT):
                stack.append(list(arg[1]))
    return False


def pattern_problem(pattern: str) -> str | None:
    """Why a schema's regular expression cannot be accepted (too long, invalid, or able to backtrack
    exponentially), or None. The expression is parsed, not run."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"a pattern is {len(pattern)} characters long (at most {MAX_PATTERN_CHARS})"
    try:
        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        return f"pattern {pattern!r:.60} is not a valid regular expression ({e})"
    if _nested_repeat(list(parsed)):
        return f"pattern {pattern!r:.60} repeats a repetition (its matching can take exponential time)"
    return None


def schema_problem(schema: Any) -> str | None:
    """Why `schema` cannot be a tool's input schema (module docstring), or None."""
    if not isinstance(schema, dict):
        return f"its input schema is a {type(schema).__name__}, not a JSON-Schema object"
    if schema.get("type", "object") != "object":
        return f"its input schema has type {schema.get('type')!r:.40}, not 'object'"
    if not isinstance(schema.get("properties", {}), dict):
        return "its input schema's properties is not an object"
    size, refs, patterns = _walk(schema)
    if size:
        return size
    for ref in refs:
        if not _resolves(schema, ref):
            return f"its input schema has a $ref {ref!r:.80} that does not resolve inside the schema"
    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem:
            return problem
    import jsonschema  # deferred: comes with mcp

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as e:
        return f"its input schema is not valid JSON Schema ({str(e).splitlines()[0][:160]})"
    except (RecursionError, ValueError, TypeError) as e:
        return f"its input schema cannot be checked ({type(e).__name__})"
    return None


def tool_problem(tool: Any) -> str | None:
    """Why one entry of a tools/list answer cannot be offered, or None."""
    if not isinstance(tool, dict):
        return f"the entry is a {type(tool).__name__}, not a tool object"
    name = tool.get("name")
    if not (isinstance(name, str) and name.strip()):
        return "the tool has no name"
    return schema_problem(tool.get("inputSchema"))


MAX_WARNED = 10_000
"""Left-out tools remembered so that each is logged once per process."""
_WARNED: set[tuple[str, str, str]] = set()


def screen_tools(answer: dict[str, Any], server: str) -> dict[str, Any]:
    """A tools/list answer (a JSON-RPC response) with every tool that has a `tool_problem` left out,
    each logged in one line naming `server`, the tool and why (once per process: every episode of a
    restarted server lists the same tools)."""
    result = answer.get("result")
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return answer
    kept = []
    for tool in tools:
        problem = tool_problem(tool)
        if problem is None:
            kept.append(tool)
            continue
        name = str(tool.get("name") if isinstance(tool, dict) else None)[:80]
        if (server, name, problem) not in _WARNED:  # once per process, not once per episode's server
            if len(_WARNED) < MAX_WARNED:
                _WARNED.add((server, name, problem))
            logger.warning("MCP server %r: tool %r left out: %s", server, name, problem)
    return {**answer, "result": {**result, "tools": kept}}


def _pattern_not_asserted(validator: Any, pattern: Any, instance: Any, schema: Any) -> None:
    """The ``pattern`` keyword of `validator`'s validators: no expression a server sent runs here."""
    return None


@functools.lru_cache(maxsize=256)
def validator(schema_text: str) -> Any:
    """A JSON-Schema validator of the draft the schema declares (2020-12 when it declares none) that
    does not assert ``pattern``, or None when the schema is not valid JSON Schema."""
    import jsonschema  # deferred: comes with mcp

    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except (jsonschema.SchemaError, RecursionError) as e:
        why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        logger.warning("an MCP tool's input schema is not valid JSON Schema (%s); its calls are checked "
                       "for argument names only", why)
        return None
    return jsonschema.validators.extend(cls, {"pattern": _pattern_not_asserted})(schema)
