"""Python call lists: ``[func(a=1, b='x'), mod.f(), Name With Spaces(x=[1, 2])]`` -> ToolCalls.

A small scanner finds each call's name and each keyword argument's extent (string- and
bracket-aware, linear); single argument values go through `ast.literal_eval`, never `eval`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from tooltune.parsing.json_calls import loads_strict, strip_fence
from tooltune.parsing.limits import MAX_BLOCK_CHARS, MAX_CALLS, MAX_DEPTH
from tooltune.schema import ToolCall


def _code_chars(s: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """(index, character) of each character from `start` that lies outside a string literal."""
    quote = ""
    escaped = False
    for i in range(start, len(s)):
        ch = s[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        else:
            yield i, ch


def nesting_depth(s: str, limit: int) -> int:
    """Max bracket depth outside string literals, stopping early once `limit` is exceeded (a cheap,
    linear bound to check before `ast.parse`, whose recursion the depth would otherwise drive)."""
    depth = best = 0
    for _, ch in _code_chars(s):
        if ch in _OPENERS:
            depth += 1
            if depth > best:
                best = depth
                if best > limit:
                    return best
        elif ch in _CLOSERS:
            depth -= 1
    return best


def _too_deep(s: str) -> bool:
    # counting brackets runs at C speed; only suspicious blocks pay for the exact scan
    if s.count("[") + s.count("{") + s.count("(") <= MAX_DEPTH:
        return False
    return nesting_depth(s, MAX_DEPTH) > MAX_DEPTH


_NAME_FORBIDDEN = set("()[]{}=,'\"\n")
_OPENERS, _CLOSERS = "([{", ")]}"


def parse_python_calls(text: str) -> list[ToolCall] | None:
    """Decode a Python-call list (or one call); keyword arguments with literal values only.

    Names may contain dots and spaces (ToolACE); values may contain commas, parentheses, quotes and
    nested containers. Returns None for anything else (positional arguments, expressions, names).
    """
    if not isinstance(text, str) or len(text) > MAX_BLOCK_CHARS:
        return None
    calls, _ = python_calls_with_error(strip_fence(text))
    return calls


def python_calls_with_error(s: str) -> tuple[list[ToolCall] | None, str | None]:
    s = s.strip()
    if len(s) > MAX_BLOCK_CHARS:
        return None, f"longer than {MAX_BLOCK_CHARS} characters"
    if _too_deep(s):
        return None, f"nesting deeper than {MAX_DEPTH}"
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
    calls: list[ToolCall] = []
    pos, n = 0, len(s)
    while True:
        pos = _skip_ws(s, pos)
        if pos >= n:
            break
        call, pos, err = _one_python_call(s, pos)
        if call is None:
            return None, err
        calls.append(call)
        if len(calls) > MAX_CALLS:
            return None, f"more than {MAX_CALLS} calls"
        pos = _skip_ws(s, pos)
        if pos < n:
            if s[pos] != ",":
                return None, f"expected ',' between calls at offset {pos}"
            pos += 1
    return calls, None


def _skip_ws(s: str, pos: int) -> int:
    n = len(s)
    while pos < n and s[pos].isspace():
        pos += 1
    return pos


def _one_python_call(s: str, pos: int) -> tuple[ToolCall | None, int, str | None]:
    paren = s.find("(", pos)
    if paren < 0:
        return None, pos, f"expected a call at offset {pos}"
    name = s[pos:paren].strip()
    if not name or any(ch in _NAME_FORBIDDEN for ch in name):
        return None, pos, f"invalid function name {name[:40]!r}"
    pos = paren + 1
    args: dict[str, Any] = {}
    n = len(s)
    while True:
        pos = _skip_ws(s, pos)
        if pos >= n:
            return None, pos, f"unclosed call to {name[:40]!r}"
        if s[pos] == ")":
            return ToolCall(name=name, arguments=args), pos + 1, None
        eq = s.find("=", pos)
        if eq < 0:
            return None, pos, f"positional or malformed argument in {name[:40]!r}"
        key = s[pos:eq].strip()
        if not key.isidentifier():
            return None, pos, f"invalid argument name {key[:40]!r} in {name[:40]!r}"
        if key in args:
            return None, pos, f"duplicate argument {key!r} in {name[:40]!r}"
        end = _value_end(s, eq + 1)
        if end < 0:
            return None, pos, f"unterminated value for {key!r} in {name[:40]!r}"
        ok, value = _literal(s[eq + 1 : end])
        if not ok:
            return None, pos, f"argument {key!r} of {name[:40]!r} is not a literal"
        args[key] = value
        pos = end
        if s[pos] == ",":
            pos += 1


def _value_end(s: str, pos: int) -> int:
    """Index of the ',' or ')' ending the value that starts at `pos` (string- and bracket-aware)."""
    depth = 0
    for i, ch in _code_chars(s, pos):
        if ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            if depth == 0:
                return i if ch == ")" else -1
            depth -= 1
        elif ch == "," and depth == 0:
            return i
    return -1


_JSON_WORDS = {"true": True, "false": False, "null": None}


def _literal(text: str) -> tuple[bool, Any]:
    """A Python (or JSON-style) literal value; (False, None) if it is anything else."""
    t = text.strip()
    if not t:
        return False, None
    if t in _JSON_WORDS:
        return True, _JSON_WORDS[t]
    try:
        value = ast.literal_eval(t)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        try:
            return True, loads_strict(t)
        except (ValueError, RecursionError):
            return False, None
    return _to_json_like(value)


def _to_json_like(v: Any) -> tuple[bool, Any]:
    """Tuples and sets become lists; bytes, complex and other non-JSON literals are refused."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return True, v
    if isinstance(v, (list, tuple, set, frozenset)):
        items = sorted(v, key=repr) if isinstance(v, (set, frozenset)) else v
        out = []
        for x in items:
            ok, y = _to_json_like(x)
            if not ok:
                return False, None
            out.append(y)
        return True, out
    if isinstance(v, dict):
        d = {}
        for k, x in v.items():
            ok, y = _to_json_like(x)
            if not ok or not isinstance(k, (str, int, float, bool)):
                return False, None
            d[k] = y
        return True, d
    return False, None
