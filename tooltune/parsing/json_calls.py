"""JSON call blocks: a list of {"name", "arguments"} objects (or one object) -> ToolCalls.

Decoding goes through one `json.JSONDecoder` that refuses duplicate keys and NaN/Infinity; its C
scanner turns pathological nesting into a RecursionError, which is caught.
"""

from __future__ import annotations

import json
from typing import Any

from tooltune.parsing.limits import MAX_BLOCK_CHARS, MAX_CALLS, MAX_DEPTH
from tooltune.schema import ToolCall


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


# one decoder reused: json.loads with hooks builds a new decoder on every call
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_reject_constant)


def loads_strict(s: str) -> Any:
    return _DECODER.decode(s)


def _value_too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a decoded JSON value nests containers deeper than `limit` (stops at the limit)."""
    if limit < 0:
        return True
    if isinstance(value, dict):
        return any(_value_too_deep(v, limit - 1) for v in value.values() if isinstance(v, (dict, list)))
    if isinstance(value, list):
        return any(_value_too_deep(v, limit - 1) for v in value if isinstance(v, (dict, list)))
    return False


def decode_json_calls(block: str, strict: bool = True) -> tuple[list[ToolCall] | None, str | None]:
    """Decode a JSON call list (or one call object) into ToolCalls: (calls, None) or (None, reason)."""
    if len(block) > MAX_BLOCK_CHARS:
        return None, f"call block longer than {MAX_BLOCK_CHARS} characters"
    b = block.strip()
    if not b:
        return None, "empty call block"
    try:
        data = loads_strict(b)  # the C decoder guards its own recursion (RecursionError, caught below)
    except _DuplicateKey as e:
        return None, f"call block has a {e}"
    except RecursionError:
        return None, f"nesting deeper than {MAX_DEPTH}"
    except ValueError as e:
        return None, f"call block is not valid JSON ({str(e)[:80]})"
    # counting brackets runs at C speed; only blocks that could be too deep pay for the walk
    if b.count("[") + b.count("{") > MAX_DEPTH and _value_too_deep(data, MAX_DEPTH - 1):
        return None, f"nesting deeper than {MAX_DEPTH}"
    return _calls_from_json(data, strict)


def _calls_from_json(data: Any, strict: bool) -> tuple[list[ToolCall] | None, str | None]:
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        return None, f"call block is a JSON {type(data).__name__}, not a list of calls"
    if len(data) > MAX_CALLS:
        return None, f"more than {MAX_CALLS} calls"
    calls = []
    for i, c in enumerate(data):
        if not isinstance(c, dict):
            return None, f"call {i} is not an object"
        name = c.get("name")
        if not isinstance(name, str) or not name.strip():
            return None, f"call {i} has no string 'name'"
        if "arguments" not in c:
            if strict:
                return None, f"call {i} has no 'arguments'"
            args: Any = {}
        else:
            args = c["arguments"]
        if isinstance(args, str) and not strict:  # OpenAI-style serialized arguments
            try:
                args = loads_strict(args)
            except (ValueError, RecursionError):
                return None, f"call {i} has unparseable string 'arguments'"
        if not isinstance(args, dict):
            return None, f"call {i} 'arguments' is not an object"
        if strict and len(c) != 2:
            extra = sorted(k for k in c if k not in ("name", "arguments"))
            return None, f"call {i} has unexpected key(s) {extra[:3]}"
        calls.append(ToolCall(name=name, arguments=args))
    return calls, None


def parse_json_calls(text: str) -> list[ToolCall] | None:
    """A bare JSON list of call objects (or one object), optionally in a code fence; None if not."""
    if not isinstance(text, str) or len(text) > MAX_BLOCK_CHARS:
        return None
    calls, _ = decode_json_calls(strip_fence(text), strict=False)
    return calls


def strip_fence(text: str) -> str:
    s = text.strip()
    if s.startswith("```") and s.endswith("```") and len(s) >= 6:
        s = s[3:-3]
        first_newline = s.find("\n")
        if first_newline >= 0 and s[:first_newline].strip().isalpha():  # ```json / ```python
            s = s[first_newline + 1 :]
    return s.strip()
