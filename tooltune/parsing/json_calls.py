"""JSON call blocks -> ToolCalls, under one of three rule sets, plus ToolRL's one-object-per-line blocks.

Rule sets for a block holding a JSON list of call objects (or one object, a one-call list):

- `STRICT` (the strict format): each call has exactly the keys "name" (a non-empty string) and
  "arguments" (an object); duplicate keys and NaN/Infinity are refused.
- `ORIGINAL` (the `substring` mode and the calls-only read of the Tool-N1 and R2IF grammars): the rules
  of Tool-N1's released scorer. `json.loads` semantics (the last of duplicate keys wins, NaN/Infinity
  are read), every call an object with a "name" and an "arguments" key, other keys ignored. Arguments
  must be an object to be compared at all: a JSON-string "arguments" is not decoded (the scorer
  compares it as a string, so it never equals the ground truth's object).
- `LENIENT` (hermes and bare-JSON answers, OpenAI-style): strict JSON, other keys ignored, a missing
  "arguments" is {}, and a JSON-string "arguments" is decoded.

A block whose JSON is itself a string is refused under every rule set, including a string that holds
an encoded call list (the scorer decodes that once more; the format asks for a list of calls).

Decoding goes through module-level `json.JSONDecoder`s; their C scanner turns pathological nesting into
a RecursionError, which is caught, and decoded values nested deeper than `MAX_DEPTH` are refused.
"""

from __future__ import annotations

import json
from typing import Any

from tooltune.parsing.limits import MAX_BLOCK_CHARS, MAX_CALLS, MAX_DEPTH
from tooltune.schema import ToolCall

STRICT, ORIGINAL, LENIENT = "strict", "original", "lenient"
RULES = (STRICT, ORIGINAL, LENIENT)


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _DuplicateKey(f"duplicate key {dup[:40]!r}")
    return d


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON value")


# decoders reused: json.loads with hooks builds a new decoder on every call
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_reject_constant)
_PLAIN = json.JSONDecoder()  # json.loads semantics: the last duplicate key wins, NaN/Infinity read


def loads_strict(s: str) -> Any:
    return _DECODER.decode(s)


def value_too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a decoded JSON value nests containers deeper than `limit` (stops at the limit)."""
    if limit < 0:
        return True
    if isinstance(value, dict):
        return any(value_too_deep(v, limit - 1) for v in value.values() if isinstance(v, (dict, list)))
    if isinstance(value, list):
        return any(value_too_deep(v, limit - 1) for v in value if isinstance(v, (dict, list)))
    return False


def _load(text: str, rules: str) -> tuple[Any, str | None]:
    """(value, None) or (None, reason): one JSON value under `rules`, nesting bounded."""
    try:
        # the C decoder guards its own recursion (RecursionError, caught below)
        data = _PLAIN.decode(text) if rules == ORIGINAL else _DECODER.decode(text)
    except _DuplicateKey as e:
        return None, f"call block has a {e}"
    except RecursionError:
        return None, f"nesting deeper than {MAX_DEPTH}"
    except ValueError as e:
        return None, f"call block is not valid JSON ({str(e)[:80]})"
    # counting brackets runs at C speed; only text that could be too deep pays for the walk
    if text.count("[") + text.count("{") > MAX_DEPTH and value_too_deep(data, MAX_DEPTH - 1):
        return None, f"nesting deeper than {MAX_DEPTH}"
    return data, None


def _load_block(block: str, rules: str) -> tuple[Any, str | None]:
    if len(block) > MAX_BLOCK_CHARS:
        return None, f"call block longer than {MAX_BLOCK_CHARS} characters"
    b = block.strip()
    if not b:
        return None, "empty call block"
    return _load(b, rules)


def decode_json_calls(block: str, rules: str = STRICT) -> tuple[list[ToolCall] | None, str | None]:
    """Decode a JSON call list (or one call object) under `rules`: (calls, None) or (None, reason)."""
    data, err = _load_block(block, rules)
    if err is not None:
        return None, err
    return _calls_from_json(data, rules)


def _call_list(data: Any) -> tuple[list[Any] | None, str | None]:
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        return None, f"call block is a JSON {type(data).__name__}, not a list of calls"
    if len(data) > MAX_CALLS:
        return None, f"more than {MAX_CALLS} calls"
    return data, None


def _calls_from_json(data: Any, rules: str) -> tuple[list[ToolCall] | None, str | None]:
    items, err = _call_list(data)
    if items is None:
        return None, err
    calls = []
    for i, c in enumerate(items):
        if not isinstance(c, dict):
            return None, f"call {i} is not an object"
        name = c.get("name")
        if not isinstance(name, str) or not name.strip():
            return None, f"call {i} has no string 'name'"
        if "arguments" not in c:
            if rules != LENIENT:
                return None, f"call {i} has no 'arguments'"
            args: Any = {}
        else:
            args = c["arguments"]
        if isinstance(args, str) and rules == LENIENT:  # OpenAI-style serialized arguments
            try:
                args = loads_strict(args)
            except (ValueError, RecursionError):
                return None, f"call {i} has unparseable string 'arguments'"
        if not isinstance(args, dict):
            return None, f"call {i} 'arguments' is not an object"
        if rules == STRICT and len(c) != 2:
            extra = sorted(k for k in c if k not in ("name", "arguments"))
            return None, f"call {i} has unexpected key(s) {extra[:3]}"
        calls.append(ToolCall(name=name, arguments=args))
    return calls, None


def json_call_names(block: str) -> list[str] | None:
    """The function names of an `ORIGINAL`-rules call block, whatever its arguments hold: every call an
    object with a string "name" and an "arguments" key of any JSON type. None if the block is not that.

    The fine-grained reward's name term reads this: the original scorer credits the names of calls
    whose arguments it cannot match (a JSON-string "arguments", say)."""
    data, err = _load_block(block, ORIGINAL)
    if err is not None:
        return None
    items, err = _call_list(data)
    if items is None:
        return None
    names = []
    for c in items:
        if not isinstance(c, dict) or "arguments" not in c or not isinstance(c.get("name"), str):
            return None
        names.append(c["name"])
    return names


def decode_json_lines(block: str, key: str = "parameters") -> tuple[list[ToolCall] | None, str | None]:
    """ToolRL's call block: the block with surrounding whitespace removed, split at newlines, one JSON
    object per line (read as `json.loads` reads it) with a string "name" and an object under `key`;
    other keys are ignored. An empty line, a list, or a call without `key` makes the block unreadable."""
    if len(block) > MAX_BLOCK_CHARS:
        return None, f"call block longer than {MAX_BLOCK_CHARS} characters"
    lines = block.strip().split("\n")
    if len(lines) > MAX_CALLS:
        return None, f"more than {MAX_CALLS} calls"
    calls = []
    for i, line in enumerate(lines):
        c, err = _load(line, ORIGINAL)
        if err is not None:
            return None, f"line {i}: {err}"
        if not isinstance(c, dict):
            return None, f"line {i} is not a JSON object"
        name, args = c.get("name"), c.get(key)
        if not isinstance(name, str) or not name.strip():
            return None, f"line {i} has no string 'name'"
        if not isinstance(args, dict):
            return None, f"line {i} has no object {key!r}"
        calls.append(ToolCall(name=name, arguments=args))
    return calls, None


def parse_json_calls(text: str) -> list[ToolCall] | None:
    """A bare JSON list of call objects (or one object), optionally in a code fence; None if not."""
    if not isinstance(text, str) or len(text) > MAX_BLOCK_CHARS:
        return None
    calls, _ = decode_json_calls(strip_fence(text), LENIENT)
    return calls


def strip_fence(text: str) -> str:
    s = text.strip()
    if s.startswith("```") and s.endswith("```") and len(s) >= 6:
        s = s[3:-3]
        first_newline = s.find("\n")
        if first_newline >= 0 and s[:first_newline].strip().isalpha():  # ```json / ```python
            s = s[first_newline + 1 :]
    return s.strip()
