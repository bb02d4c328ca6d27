"""A model's own response parser, bounded: transformers' `parse_response` under tooltune's limits.

A model family's answer format is described by a response template (TRL's
`trl.chat_template_utils.add_response_schema` attaches one per known chat template; recent checkpoints
ship their own), and transformers parses assistant text with it (`tokenizer.parse_response`, the same
`transformers.utils.chat_parsing.parse_response` called here). That parser is regex-driven and was not
written for hostile text: a ``<parameter=…>`` value of whitespace without its closing tag backtracks
cubically (5,000 characters took two minutes), a zero-width reasoning opener that looks ahead for
``</think>`` rescans the rest of the text at every position, every open or close marker starts another
scan of the remaining text, and deep JSON raises RecursionError. `ResponseFormat.decode` runs it only on
text that passes linear checks, so that the parser's work stays within a constant (the caps below) times
the text length:

- at most `MAX_NATIVE_CHARS` characters in all (the parser reads the reasoning too);
- each marker that opens a region (a literal, or the literal head of a pattern; a pattern without one
  is counted by its matches), the marker that ends the free text, and the closing tag a zero-width
  opener waits for occur at most `MAX_CALLS` times each;
- the head and tail of each argument tag (``<parameter=`` … ``</parameter>``) alternate, so that every
  lazy scan of a value stops at its own tail, and there are at most `MAX_VALUES` of them; a string
  delimiter (Gemma 4's ``<|"|>``) occurs at most 2 × `MAX_VALUES` times;
- a reasoning opener that only looks ahead for its closing tag is anchored where the scan starts
  (``\\G``), which matches exactly where the unanchored one would first match;
- the whole text is parsed at once, as at the end of a stream: the streaming pass's partial matching,
  quadratic in the regex module for some openers, is not run.

Anything the parser still raises is a failed format with the reason; decoded calls are checked for
shape (a name, an object of arguments), count and nesting depth. `decode` never raises.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooltune.parsing import MAX_CALLS, MAX_DEPTH
from tooltune.parsing.json_calls import value_too_deep
from tooltune.schema import Parsed, ToolCall

logger = logging.getLogger(__name__)

MAX_NATIVE_CHARS = 200_000
"""Longest answer a model's own response parser reads (reasoning included: it is one of the regions the
parser reads)."""

MAX_VALUES = 16 * MAX_CALLS
"""Most argument tags (``<parameter=…>``) or delimited strings in one answer."""

_META = set(".^$*+?{}[]()|")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
_LOOKAHEAD_ANY = ("(?=[\\s\\S]*?", "(?=.*?")


def _regex_tokens(pattern: str) -> list[str | None]:
    """`pattern` as a list of its mandatory literal characters, None for anything else (a class, a group
    bracket, an alternation, a quantified character); a top-level alternation makes it all None."""
    out: list[str | None] = []
    i, depth = 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            out.append(_ESCAPES.get(n, None if n.isalnum() else n))
            i += 2
            continue
        if c == "[":
            j = i + 1 + (pattern[i + 1 : i + 2] == "^")
            j += pattern[j : j + 1] == "]"
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            out.append(None)
            i = j + 1
            continue
        if c in "*?{" and out:
            out[-1] = None  # the quantified token is optional
        if c == "|" and depth == 0:
            return [None]
        depth += (c == "(") - (c == ")")
        out.append(None if c in _META else c)
        i += 1
    return out


def literal_head(pattern: str) -> str:
    """The literal text every match of `pattern` starts with ("" when none)."""
    head = []
    for t in _regex_tokens(pattern):
        if t is None:
            break
        head.append(t)
    return "".join(head)


def literal_tail(pattern: str) -> str:
    """The literal text every match of `pattern` ends with ("" when none)."""
    tail = []
    for t in reversed(_regex_tokens(pattern)):
        if t is None:
            break
        tail.append(t)
    return "".join(reversed(tail))


@dataclass(frozen=True)
class _Marker:
    """A region marker whose occurrences are capped: a literal (counted with `str.count`) or a compiled
    pattern without a literal head (its matches counted, stopping past the cap)."""

    what: str
    literal: str = ""
    pattern: Any = None

    def over(self, text: str, cap: int) -> bool:
        if self.literal:
            return text.count(self.literal) > cap
        return any(n >= cap for n, _ in enumerate(self.pattern.finditer(text)))


def _text_values(spec: dict[str, Any]) -> bool:
    """Whether the format writes argument values as bare text (``<parameter=days>\\n3\\n</parameter>``):
    a value parser named ``text`` (TRL sets it where transformers can type values by the tools)."""
    return any(((f.get("content_args") or {}).get("value_parser") or {}).get("name") == "text"
               for f in spec.get("fields", {}).values())


_PYTHON_WORDS = {"True": True, "False": False, "None": None}


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON value")


_JSON = json.JSONDecoder(parse_constant=_no_constant)  # NaN and Infinity stay text


def read_bare_value(text: str) -> Any:
    """A bare-text argument value read without the tool's schema: JSON where it is JSON (``3``, ``[1]``,
    ``null``), Python's spelling of a boolean or None (``True``, as a chat template's ``string`` filter
    writes it), else the text itself. Ambiguous by nature: a string argument "75001" reads as 75001."""
    if len(text) > MAX_NATIVE_CHARS:
        return text
    try:
        return _JSON.decode(text.strip())
    except (ValueError, RecursionError):
        return _PYTHON_WORDS.get(text.strip(), text)


def _typed_keys(tools: Sequence[dict[str, Any]] | None) -> dict[str, set[str]]:
    """Tool name -> the parameters whose schema names a type (transformers casts those)."""
    out: dict[str, set[str]] = {}
    for tool in tools or ():
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        params = fn.get("parameters") if isinstance(fn, dict) else None
        props = params.get("properties") if isinstance(params, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str) and isinstance(props, dict):
            out[fn["name"]] = {k for k, v in props.items()
                               if isinstance(v, dict) and ("type" in v or "anyOf" in v or "oneOf" in v)}
    return out


def _anchored_lookaheads(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` with each zero-width opener of the form ``(?=[\\s\\S]*?X)`` anchored at the scan start.

    Such an opener holds at a position exactly when X occurs at or after it, so it holds at the scan
    start whenever it holds anywhere after it: ``\\G`` finds the same match in one scan instead of one
    scan per position."""
    spec = copy.deepcopy(spec)
    for f in spec.get("fields", {}).values():
        p = f.get("open_pattern")
        if isinstance(p, str) and p.startswith(_LOOKAHEAD_ANY):
            f["open_pattern"] = "\\G" + p
    return spec


@dataclass(frozen=True)
class _Compiled:
    """A response template compiled once, with what the checks and the verdict read from it."""

    template: Any
    """transformers' `ResponseTemplate` (its reasoning opener anchored, `_anchored_lookaheads`)."""
    parser: Callable[..., Any]
    """transformers' `ResponseParser` class."""
    text_values: bool
    markers: tuple[_Marker, ...]
    values: tuple[_Marker, ...]
    paired: tuple[tuple[str, str], ...]
    call_heads: tuple[str, ...]
    reasoning_heads: tuple[str, ...]
    reasoning_field: str | None
    literals: tuple[str, ...]


def _compile(spec: dict[str, Any]) -> _Compiled:
    # deferred: transformers is heavy; a response format only exists where a tokenizer does
    from transformers.utils.chat_parsing import ResponseParser
    from transformers.utils.chat_parsing.response_templates import (  # deferred: as above
        load_response_template,
    )

    template = load_response_template(_anchored_lookaheads(spec))
    markers, heads, reasoning_heads = [], [], []
    for name, f in template.fields.items():
        what = "calls" if name == "tool_calls" else f"{name} openings"
        if f.open_re is not None and f.open_re.pattern.startswith("\\G(?="):
            waits_for = literal_tail(f.open_re.pattern[5:-1])  # what the anchored lookahead waits for
            if waits_for:
                markers.append(_Marker(f"{waits_for.strip()!r} markers", literal=waits_for))
        elif f.open_re is not None:
            found = list(f.open_literals or []) or [literal_head(f.open_re.pattern)]
            if all(found):
                markers += [_Marker(f"{what} ({lit.strip()!r})", literal=lit) for lit in found]
            else:
                markers.append(_Marker(what, pattern=f.open_re))
            if name == "tool_calls":
                heads += [h for h in found if h]
            elif name not in ("content", "role"):
                reasoning_heads += [h for h in found if h]
        if name == template.implicit and f.close_re is not None:
            lits = list(f.close_literals or []) or [literal_head(f.close_re.pattern)]
            if all(lits):
                markers += [_Marker(f"{lit.strip()!r} markers", literal=lit) for lit in lits]
            else:
                markers.append(_Marker(f"ends of the {name}", pattern=f.close_re))
    paired, values = [], []
    for f in template.fields.values():
        args = f.content_args or {}
        tag = args.get("tag_pattern")
        if isinstance(tag, str) and literal_head(tag) and literal_tail(tag):
            paired.append((literal_head(tag), literal_tail(tag)))
        for delims in args.get("string_delims") or ():
            values += [_Marker(f"string delimiters {d!r}", literal=d) for d in dict.fromkeys(delims) if d]
    reasoning = [n for n in template.fields if n not in ("tool_calls", "content", "role")]
    literals = {lit for f in template.fields.values() for lit in (
        *(f.open_literals or ()), *(f.close_literals or ()),
        *(literal_head(r.pattern) for r in (f.open_re, f.close_re) if r is not None))}
    return _Compiled(template, ResponseParser, _text_values(spec), tuple(markers), tuple(values),
                     tuple(paired), tuple(heads), tuple(reasoning_heads), reasoning[0] if reasoning else None,
                     tuple(sorted(lit for lit in literals if lit)))


@dataclass(frozen=True)
class ResponseFormat:
    """One response template, compiled, with the context its parser needs and the checks that bound it.

    `prefix` is the end of the generation prompt (what the chat template writes before the model's
    first token: the parser must see an opened ``<think>`` there); `terminator` is appended to a text
    that does not end with it (a completion cut at its end-of-turn token, when the format needs that
    token to close a call, as Llama 3.1's does); "" appends nothing."""

    spec: dict[str, Any]
    prefix: str = ""
    terminator: str = ""
    compiled: _Compiled = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    @classmethod
    def build(cls, spec: dict[str, Any], prefix: str = "", terminator: str = "") -> ResponseFormat:
        """Compile `spec` (a transformers response template dict); ValueError when it does not load."""
        return cls(spec, prefix, terminator, _compile(spec))

    @property
    def call_heads(self) -> tuple[str, ...]:
        """Literal heads of the call opener: in the free text of a strict answer, a call did not parse."""
        return self.compiled.call_heads

    @property
    def reasoning_heads(self) -> tuple[str, ...]:
        """Literal openers of the reasoning region: a strict answer has at most one."""
        return self.compiled.reasoning_heads

    @property
    def reasoning_field(self) -> str | None:
        """The message key of the reasoning region (``reasoning_content``, ``thinking``), None without."""
        return self.compiled.reasoning_field

    @property
    def literals(self) -> tuple[str, ...]:
        """Every literal marker of the format (region openers and closers)."""
        return self.compiled.literals

    @property
    def paired(self) -> tuple[tuple[str, str], ...]:
        """(head, tail) of each argument tag (``<parameter=``, ``</parameter>``)."""
        return self.compiled.paired

    def anchor_starts(self, text: str) -> list[int]:
        """Where the template's start anchor (the head of an assistant turn) matches in `text`."""
        return [m.start() for m in self.compiled.template.start_anchor_re.finditer(text)]

    def limit_problem(self, text: str) -> str | None:
        """Why `text` is refused before parsing (length, marker counts, unpaired argument tags), or None."""
        if len(text) > MAX_NATIVE_CHARS:
            return f"answer longer than {MAX_NATIVE_CHARS} characters"
        c = self.compiled
        for m in c.markers:
            if m.over(text, MAX_CALLS):
                return f"more than {MAX_CALLS} {m.what}"
        for m in c.values:
            if m.over(text, 2 * MAX_VALUES):
                return f"more than {2 * MAX_VALUES} {m.what}"
        for head, tail in c.paired:
            pos, n = 0, 0
            while (start := text.find(head, pos)) >= 0:
                end = text.find(tail, start + len(head))
                nxt = text.find(head, start + len(head))
                if end < 0 or (0 <= nxt < end):
                    return f"{head}… without its {tail}"
                pos, n = end + len(tail), n + 1
                if n > MAX_VALUES:
                    return f"more than {MAX_VALUES} {head}… arguments"
            if text.count(tail) != n:
                return f"{tail} without its {head}…"
        return None

    def message(self, text: str, tools: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The parser's message for `text` (no checks: `decode` runs them first); `tools` types bare-text
        arguments by their JSON schemas (transformers' own casting)."""
        if self.terminator and not text.rstrip().endswith(self.terminator.strip()):
            text += self.terminator
        c = self.compiled
        parser = c.parser(c.template, prefix=self.prefix, tools=list(tools) if tools else None)
        # what `parse_response` does (feed, then finalize) without the streaming pass: on a complete text
        # it finds the same regions, and its partial matching is quadratic in the regex module for some
        # openers (LFM2.5's, on text full of "<|")
        parser._buffer += text
        message, _ = parser.finalize()
        return message

    def decode(self, text: str, mode: str, tools: Sequence[dict[str, Any]] | None = None) -> Parsed:
        """`text` -> Parsed under the model's own parser and tooltune's limits; never raises.

        The format holds when the parser reads the text and every call it finds is a well-formed call
        (a non-empty name, an object of arguments nested at most `MAX_DEPTH` deep, at most `MAX_CALLS`
        calls). ``strict`` also requires that the free text hold no call opener (a call that the parser
        could not read)."""
        problem = self.limit_problem(text)
        if problem is not None:
            return Parsed(None, None, False, problem)
        try:
            msg = self.message(text, tools)
        except RecursionError:
            return Parsed(None, None, False, f"nesting deeper than {MAX_DEPTH}")
        except Exception as e:  # the parser raises ValueError/KeyError/TypeError on malformed regions
            why = f"{type(e).__name__}: {str(e)[:80]}"
            return Parsed(None, None, False, f"the response parser refused it ({why})")
        parsed = self._verdict(msg, _typed_keys(tools))
        if mode == "strict" and parsed.format_ok:
            return self._strict(text, msg, parsed)
        return parsed

    def _strict(self, text: str, msg: dict[str, Any], parsed: Parsed) -> Parsed:
        """`parsed`, failed when a reasoning opener occurs twice or a call opener is left in the free
        text or the reasoning (a call the parser could not read)."""
        for head in self.reasoning_heads:
            if text.count(head) > 1:
                return Parsed(parsed.reasoning, None, False, f"more than one {head.strip()!r}")
        content = msg.get("content")
        rest = (content if isinstance(content, str) else "") + (parsed.reasoning or "")
        for head in self.call_heads:
            if head in rest:
                return Parsed(parsed.reasoning, None, False, f"{head.strip()!r} outside a readable call")
        return parsed

    def _verdict(self, msg: Any, typed: dict[str, set[str]]) -> Parsed:
        if not isinstance(msg, dict):
            return Parsed(None, None, False, "the response parser returned no message")
        reasoning = msg.get(self.reasoning_field) if self.reasoning_field else None
        reasoning = reasoning.strip() if isinstance(reasoning, str) else None
        raw = msg.get("tool_calls") or []
        if not isinstance(raw, list):
            return Parsed(reasoning, None, False, "tool calls are not a list")
        if len(raw) > MAX_CALLS:
            return Parsed(reasoning, None, False, f"more than {MAX_CALLS} calls")
        calls = []
        for i, item in enumerate(raw):
            fn = item.get("function", item) if isinstance(item, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str) or not name.strip():
                return Parsed(reasoning, None, False, f"call {i} has no name")
            args = fn.get("arguments", {})
            if isinstance(args, str):  # OpenAI-style serialized arguments
                try:
                    args = json.loads(args) if args.strip() else {}
                except (ValueError, RecursionError):
                    return Parsed(reasoning, None, False, f"call {i} has arguments that are not JSON")
            args = {} if args is None else args
            if not isinstance(args, dict):
                return Parsed(reasoning, None, False, f"call {i} has arguments that are not an object")
            if self.compiled.text_values:  # values the tool's schema did not type are read as they look
                known = typed.get(name, set())
                args = {k: read_bare_value(v) if isinstance(v, str) and k not in known else v
                        for k, v in args.items()}
            if value_too_deep(args, MAX_DEPTH - 1):
                return Parsed(reasoning, None, False, f"nesting deeper than {MAX_DEPTH}")
            calls.append(ToolCall(name.strip(), args))
        return Parsed(reasoning, calls, True, None)
