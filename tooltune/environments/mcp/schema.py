"""The input schemas of an MCP server's tools, checked before any of them is used.

`tool_problem` says why one tool of a tools/list answer cannot be offered, or None. Every check is
bounded in time and depth, whatever the server sent:

- the tool is an object with a non-empty string ``name`` and an ``inputSchema`` that is a JSON-Schema
  object (``"type": "object"`` when it names a type);
- the schema is at most `MAX_DEPTH` levels deep and has at most `MAX_NODES` values in all (walked
  without recursion); a subtree that `wire` replaced by a `deep_marker` before the message was decoded
  (a nesting no decoder may recurse into) counts with its full depth, so the warning names it;
- every ``$ref`` is a local JSON pointer (``#/...``) that resolves inside the schema;
- every regular expression (``pattern`` values, ``patternProperties`` keys) is read in JSON Schema's
  dialect, ECMA-262 (`python_pattern` translates named groups ``(?<name>…)``, back-references to
  them and Unicode property classes), and has no unbounded repetition whose body opens with another one or
  with an alternation (``(a+)+``, ``(a|aa)*``: the shapes whose matching time grows exponentially with
  the input; ``(-[a-z]+)*`` passes). Expressions are parsed, never run. One that cannot be parsed even
  so does not cost the tool: it is ignored (nothing here asserts a pattern; the server checks its own)
  and noted (`schema_notes`);
- the schema is valid for its JSON-Schema draft (`jsonschema`'s meta-schema check, which only runs on
  schemas that passed the bounds above; the ``regex`` format is left to the pattern check).

`screen_tools` drops the tools with a problem from a tools/list answer, logging one line per tool that
names it and the reason (and one per note); the rest of the server stays usable. It also removes each
tool's ``outputSchema``: the SDK's client checks every result against it, so a result cut to the
message cap (`wire`), or one whose structured content does not fit its own schema, would fail the call
and end the session; tooltune reads a result's text and value without needing its schema.

`validator` is the JSON-Schema validator
`tooltune.environments.mcp.task.check_call` uses for a call's arguments; it does not assert ``pattern``
(the server checks its own patterns: no expression a server sent runs on a model's text here).
"""

from __future__ import annotations

import copy
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
DEEP_PREFIX = "[cut by tooltune: "
_DEEP = re.compile(r"\[cut by tooltune: (\d{1,12}) more levels of nesting\]")


def deep_marker(levels: int) -> str:
    """The string that stands for a subtree `levels` deep that was cut before decoding (`wire`)."""
    return f"{DEEP_PREFIX}{levels} more levels of nesting]"


def _walk(schema: Any) -> tuple[str | None, list[str], list[str]]:
    """One bounded pass over `schema`: (the first size problem or None, its ``$ref`` values, its regular
    expressions)."""
    refs: list[str] = []
    patterns: list[str] = []
    stack: list[tuple[Any, int]] = [(schema, 1)]
    nodes = deepest = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"its input schema has more than {MAX_NODES} values", refs, patterns
        if isinstance(value, str) and value.startswith(DEEP_PREFIX) and (m := _DEEP.fullmatch(value)):
            depth += int(m.group(1)) - 1  # the subtree cut before decoding, counted whole
            deepest = max(deepest, depth)
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
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
    if deepest > MAX_DEPTH:
        return (f"its input schema is nested {deepest} levels deep, deeper than {MAX_DEPTH} levels", refs,
                patterns)
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


_JS_ESCAPE = re.compile(r"\\(?:[pP]\{[\w=]{1,60}\}|k<(\w{1,60})>|u\{([0-9a-fA-F]{1,6})\}|c([A-Za-z])|.)",
                        re.S)


def python_pattern(pattern: str) -> str:
    """An ECMA-262 regular expression (JSON Schema's dialect) in Python's: named groups ``(?<name>…)`` and
    references ``\\k<name>``, ``\\u{…}`` and ``\\cX`` escapes, ``[^]``, and the Unicode property classes
    ``\\p{…}`` / ``\\P{…}`` (read as ``\\w`` / ``\\W``: enough to parse the expression's structure, which
    is all that is done with it)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and (m := _JS_ESCAPE.match(pattern, i)):
            text = m.group(0)
            if text[1] in "pP" and len(text) > 2:
                text = "\\w" if text[1] == "p" else "\\W"
            elif m.group(1):
                text = f"(?P={m.group(1)})"
            elif m.group(2):
                text = f"\\U{int(m.group(2), 16):08x}"
            elif m.group(3):
                text = f"\\x{ord(m.group(3).upper()) - 64:02x}"
            out.append(text)
            i = m.end()
        elif pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!"):
            out.append("(?P<")
            i += 3
        elif pattern.startswith("[^]", i):
            out.append("[\\s\\S]")
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _pattern(pattern: str) -> tuple[str | None, str | None]:
    """(why `pattern` cannot be accepted, or None; why it is ignored, or None)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"a pattern is {len(pattern)} characters long (at most {MAX_PATTERN_CHARS})", None
    try:
        parsed = _parser.parse(python_pattern(pattern))
    except (re.error, RecursionError, OverflowError) as e:
        return None, (f"pattern {pattern!r:.60} is ignored: it is not a regular expression tooltune can "
                      f"read ({e})")
    if _nested_repeat(list(parsed)):
        return f"pattern {pattern!r:.60} repeats a repetition (its matching can take exponential time)", None
    return None, None


def pattern_problem(pattern: str) -> str | None:
    """Why a schema's regular expression cannot be accepted (too long, or able to backtrack
    exponentially), or None. The expression is read in JSON Schema's dialect (`python_pattern`) and
    parsed, not run; one that cannot be parsed is no problem, only a note (`pattern_note`)."""
    return _pattern(pattern)[0]


def pattern_note(pattern: str) -> str | None:
    """Why a schema's regular expression is ignored (it cannot be parsed even in JSON Schema's dialect),
    or None."""
    return _pattern(pattern)[1]


@functools.lru_cache(maxsize=8)
def _formats(cls: Any) -> Any:
    """`cls`'s format checker without ``regex``: patterns are checked in their own dialect here."""
    checker = copy.copy(cls.FORMAT_CHECKER)
    checker.checkers = {k: v for k, v in cls.FORMAT_CHECKER.checkers.items() if k != "regex"}
    return checker


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
        cls.check_schema(schema, format_checker=_formats(cls))
    except jsonschema.SchemaError as e:
        return f"its input schema is not valid JSON Schema ({str(e).splitlines()[0][:160]})"
    except (RecursionError, ValueError, TypeError) as e:
        return f"its input schema cannot be checked ({type(e).__name__})"
    return None


def schema_notes(schema: Any) -> list[str]:
    """What of an accepted schema is ignored (`pattern_note`), one line each."""
    _, _, patterns = _walk(schema)
    return [note for p in dict.fromkeys(patterns) if (note := pattern_note(p))]


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
        name = str(tool.get("name") if isinstance(tool, dict) else None)[:80]
        if problem is None:
            kept.append({k: v for k, v in tool.items() if k != "outputSchema"})
            for note in schema_notes(tool.get("inputSchema")):
                _warn_once(server, name, note, "MCP server %r: tool %r: %s")
        else:
            _warn_once(server, name, problem, "MCP server %r: tool %r left out: %s")
    return {**answer, "result": {**result, "tools": kept}}


def _warn_once(server: str, name: str, why: str, form: str) -> None:
    """Log `form` % (server, name, why) once per process, not once per episode's server."""
    if (server, name, why) in _WARNED:
        return
    if len(_WARNED) < MAX_WARNED:
        _WARNED.add((server, name, why))
    logger.warning(form, server, name, why)


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
        cls.check_schema(schema, format_checker=_formats(cls))
    except (jsonschema.SchemaError, RecursionError) as e:
        why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        logger.warning("an MCP tool's input schema is not valid JSON Schema (%s); its calls are checked "
                       "for argument names only", why)
        return None
    return jsonschema.validators.extend(cls, {"pattern": _pattern_not_asserted})(schema)
