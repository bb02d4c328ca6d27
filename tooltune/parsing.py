"""Completion text -> `Parsed` (reasoning, calls, format verdict). Never raises.

The parser owns the output grammar of every template: rewards derive their format term from
`Parsed.format_ok`, and evaluation decodes benchmark answers through the same functions, so the
training signal and the benchmark cannot drift apart.

Model output is hostile input. Nothing here evaluates it: JSON goes through `json.loads`, Python
call syntax through a small scanner plus `ast.literal_eval` on single argument values. Every path
is linear in the input length (`str.count`/`str.find` scans, one JSON decode), input longer than
`MAX_CHARS` is rejected before any work, and bracket nesting is bounded by `MAX_DEPTH`.

Grammars:
- ``tool_n1``: ``<think>R</think>`` then ``<tool_call>[{"name": …, "arguments": {…}}, …]</tool_call>``
  (Tool-N1, arXiv 2505.00024). A single object is a one-call list; ``[]`` is an explicit no-call.
- ``r2if``: ``<reason>R</reason><tool>[…]</tool>``, or the rejection text `R2IF_REJECTION` inside
  ``<tool>`` for irrelevant requests (R2IF).
- ``hermes``: one JSON object per ``<tool_call>…</tool_call>`` block, free text elsewhere.
- ``python``: a Python-call list ``[func(a=1, b='x'), mod.f()]`` (BFCL, ACEBench, ToolACE; names may
  contain dots and spaces).
- ``json``: a bare JSON list of call objects.

Format modes: ``strict`` (exactly one reasoning block then exactly one call block, nothing but
whitespace around them; defeats the repeated-``<think>`` reward hack) and ``substring`` (the
papers' original scorer: the tags merely appear somewhere and the last call block counts).
"""

from __future__ import annotations

import ast
import json
import logging
from typing import Any

from tooltune.schema import Parsed, ToolCall

logger = logging.getLogger(__name__)

MAX_CHARS = 100_000
"""Completions longer than this are rejected outright (a real answer is a few hundred tokens)."""
MAX_DEPTH = 32
"""Deepest bracket nesting accepted in a call block."""
MAX_CALLS = 64
"""Most calls accepted in one answer."""

R2IF_REJECTION = "I cannot complete this request because none of the available functions fits it."
"""The fixed text an R2IF answer puts inside <tool> when no function should be called."""

GRAMMARS = ("tool_n1", "r2if", "hermes", "python", "json")
MODES = ("strict", "substring")

TEMPLATE_GRAMMAR: dict[str, str] = {g: g for g in GRAMMARS}
"""Prompt-template name -> output grammar; prompt templates register their aliases here."""
TEMPLATE_GRAMMAR.update({"bfcl": "python", "bfcl_strong": "python"})


def register_grammar_alias(template: str, grammar: str) -> None:
    """Let a prompt template named `template` be parsed with `grammar`."""
    if grammar not in GRAMMARS:
        raise ValueError(f"unknown grammar {grammar!r}; expected one of {GRAMMARS}")
    TEMPLATE_GRAMMAR[template] = grammar


def grammar_of(template: str) -> str:
    try:
        return TEMPLATE_GRAMMAR[template]
    except KeyError:
        raise ValueError(f"unknown template {template!r}; known: {sorted(TEMPLATE_GRAMMAR)}") from None


# ------------------------------------------------------------------------------------------------
# entry point


def parse_completion(text: Any, template: str = "tool_n1", mode: str = "strict") -> Parsed:
    """Parse one completion. `template` is a grammar name or a registered prompt-template name.

    Unknown `template`/`mode` are programming errors and raise ValueError; any `text` never does.
    """
    grammar = grammar_of(template)
    if mode not in MODES:
        raise ValueError(f"unknown format mode {mode!r}; expected one of {MODES}")
    if not isinstance(text, str):
        return Parsed(None, None, False, f"completion is {type(text).__name__}, not text")
    if len(text) > MAX_CHARS:
        return Parsed(None, None, False, f"completion longer than {MAX_CHARS} characters")
    try:
        return _PARSERS[grammar](text, mode)
    except Exception as e:  # a parser bug must never take down a training step
        logger.exception("parser failure on %d characters", len(text))
        return Parsed(None, None, False, f"internal parser error ({type(e).__name__})")


# ------------------------------------------------------------------------------------------------
# JSON call blocks


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


def _nesting_depth(s: str, limit: int) -> int:
    """Max bracket depth outside string literals, stopping early once `limit` is exceeded."""
    depth = best = 0
    quote = ""
    escaped = False
    for ch in s:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
            if depth > best:
                best = depth
                if best > limit:
                    return best
        elif ch in "]})":
            depth -= 1
    return best


def _too_deep(s: str) -> bool:
    # counting brackets runs at C speed; only suspicious blocks pay for the exact scan
    if s.count("[") + s.count("{") + s.count("(") <= MAX_DEPTH:
        return False
    return _nesting_depth(s, MAX_DEPTH) > MAX_DEPTH


# one decoder reused: json.loads with hooks builds a new decoder on every call
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_reject_constant)


def _loads(s: str) -> Any:
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


def _decode_json_calls(block: str, strict: bool = True) -> tuple[list[ToolCall] | None, str | None]:
    """Decode a JSON call list (or one call object) into ToolCalls: (calls, None) or (None, reason)."""
    b = block.strip()
    if not b:
        return None, "empty call block"
    try:
        data = _loads(b)  # the C decoder guards its own recursion (RecursionError, caught below)
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
                args = _loads(args)
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
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    calls, _ = _decode_json_calls(_strip_fence(text), strict=False)
    return calls


def _strip_fence(text: str) -> str:
    s = text.strip()
    if s.startswith("```") and s.endswith("```") and len(s) >= 6:
        s = s[3:-3]
        first_newline = s.find("\n")
        if first_newline >= 0 and s[:first_newline].strip().isalpha():  # ```json / ```python
            s = s[first_newline + 1 :]
    return s.strip()


# ------------------------------------------------------------------------------------------------
# tagged templates


def _one_block(text: str, open_tag: str, close_tag: str) -> tuple[int, int] | str:
    """(start, end) of the single block's content, or the reason there is not exactly one."""
    n_open, n_close = text.count(open_tag), text.count(close_tag)
    if n_open != 1 or n_close != 1:
        return (
            f"expected one {open_tag}…{close_tag} block, found {n_open} {open_tag} and {n_close} {close_tag}"
        )
    start = text.find(open_tag) + len(open_tag)
    end = text.find(close_tag)
    if end < start:
        return f"{close_tag} comes before {open_tag}"
    return start, end


def _parse_tagged_strict(text: str, think: tuple[str, str], call: tuple[str, str]) -> tuple:
    """Shared strict grammar: ws, reasoning block, ws, call block, ws. Returns (reasoning, block) or error."""
    r = _one_block(text, *think)
    if isinstance(r, str):
        return r
    c = _one_block(text, *call)
    if isinstance(c, str):
        return c
    (r0, r1), (c0, c1) = r, c
    if c0 < r1:
        return f"{call[0]} block must follow the {think[0]} block"
    if text[: r0 - len(think[0])].strip():
        return f"text before {think[0]}"
    if text[r1 + len(think[1]) : c0 - len(call[0])].strip():
        return f"text between {think[1]} and {call[0]}"
    if text[c1 + len(call[1]) :].strip():
        return f"text after {call[1]}"
    reasoning = text[r0:r1]
    if not reasoning.strip():
        return f"empty {think[0]} block"
    return reasoning.strip(), text[c0:c1]


def _parse_tagged_substring(text: str, think: tuple[str, str], call: tuple[str, str]) -> tuple:
    """Original scorer: all four tags present anywhere; the last complete call block counts."""
    missing = [t for t in (*think, *call) if t not in text]
    if missing:
        return f"missing tag(s) {' '.join(missing)}"
    c1 = text.rfind(call[1])
    c0 = text.rfind(call[0], 0, c1)
    if c0 < 0:
        return f"no {call[0]} before the last {call[1]}"
    r0 = text.find(think[0])
    r1 = text.find(think[1], r0 + len(think[0]))
    reasoning = text[r0 + len(think[0]) : r1].strip() if r1 >= 0 else ""
    return reasoning, text[c0 + len(call[0]) : c1]


def _parse_tool_n1(text: str, mode: str) -> Parsed:
    split = (_parse_tagged_strict if mode == "strict" else _parse_tagged_substring)(
        text, ("<think>", "</think>"), ("<tool_call>", "</tool_call>")
    )
    if isinstance(split, str):
        return Parsed(None, None, False, split)
    reasoning, block = split
    calls, err = _decode_json_calls(block, strict=mode == "strict")
    return Parsed(reasoning, calls, calls is not None, err)


def _normalize_ws(s: str) -> str:
    return " ".join(s.split())


_REJECTION_NORMALIZED = _normalize_ws(R2IF_REJECTION)


def _parse_r2if(text: str, mode: str) -> Parsed:
    split = (_parse_tagged_strict if mode == "strict" else _parse_tagged_substring)(
        text, ("<reason>", "</reason>"), ("<tool>", "</tool>")
    )
    if isinstance(split, str):
        return Parsed(None, None, False, split)
    reasoning, block = split
    if _normalize_ws(block) == _REJECTION_NORMALIZED:
        return Parsed(reasoning, [], True, None, rejected=True)
    calls, err = _decode_json_calls(block, strict=mode == "strict")
    if calls == [] and mode == "strict":
        return Parsed(
            reasoning, None, False, "empty call list: answer irrelevant requests with the rejection text"
        )
    return Parsed(reasoning, calls, calls is not None, err)


def _parse_hermes(text: str, mode: str) -> Parsed:
    calls: list[ToolCall] = []
    outside: list[str] = []
    pos = 0
    while True:
        start = text.find("<tool_call>", pos)
        if start < 0:
            outside.append(text[pos:])
            break
        end = text.find("</tool_call>", start)
        if end < 0:
            return Parsed(None, None, False, "unclosed <tool_call>")
        outside.append(text[pos:start])
        found, err = _decode_json_calls(text[start + len("<tool_call>") : end], strict=False)
        if found is None:
            return Parsed(None, None, False, err)
        calls.extend(found)
        if len(calls) > MAX_CALLS:
            return Parsed(None, None, False, f"more than {MAX_CALLS} calls")
        pos = end + len("</tool_call>")
    rest = "".join(outside)
    if "</tool_call>" in rest:
        return Parsed(None, None, False, "stray </tool_call>")
    reasoning = rest
    r = _one_block(rest, "<think>", "</think>")
    if not isinstance(r, str):
        reasoning = rest[r[0] : r[1]]
    return Parsed(reasoning.strip(), calls, True, None)


def _parse_python_grammar(text: str, mode: str) -> Parsed:
    calls, err = _python_calls(_strip_fence(text))
    return Parsed(None, calls, calls is not None, err)


def _parse_json_grammar(text: str, mode: str) -> Parsed:
    calls, err = _decode_json_calls(_strip_fence(text), strict=False)
    return Parsed(None, calls, calls is not None, err)


_PARSERS = {
    "tool_n1": _parse_tool_n1,
    "r2if": _parse_r2if,
    "hermes": _parse_hermes,
    "python": _parse_python_grammar,
    "json": _parse_json_grammar,
}


# ------------------------------------------------------------------------------------------------
# Python call lists: [func(a=1, b='x'), mod.f(), Name With Spaces(x=[1, 2])]

_NAME_FORBIDDEN = set("()[]{}=,'\"\n")
_OPENERS, _CLOSERS = "([{", ")]}"


def parse_python_calls(text: str) -> list[ToolCall] | None:
    """Decode a Python-call list (or one call); keyword arguments with literal values only.

    Names may contain dots and spaces (ToolACE); values may contain commas, parentheses, quotes and
    nested containers. Returns None for anything else (positional arguments, expressions, names).
    """
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    calls, _ = _python_calls(_strip_fence(text))
    return calls


def _python_calls(s: str) -> tuple[list[ToolCall] | None, str | None]:
    s = s.strip()
    if len(s) > MAX_CHARS:
        return None, f"longer than {MAX_CHARS} characters"
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
    quote = ""
    escaped = False
    for i in range(pos, len(s)):
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
        elif ch in _OPENERS:
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
            return True, _loads(t)
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
