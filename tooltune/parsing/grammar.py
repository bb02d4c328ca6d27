"""Output grammars: one `Grammar` object per answer format, the single owner of its tags.

A grammar knows its reasoning and call tags, how to decode a call block, the fixed rejection text
(R2IF), the prefix a CER student continues from, and how to read the calls alone (no format term).
Prompt templates hold a grammar; rewards, the CER prefix and the entropy-region tagger read the tags
from it, so no other module spells a tag.

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

from collections.abc import Callable
from dataclasses import dataclass

from tooltune.parsing.json_calls import decode_json_calls, strip_fence
from tooltune.parsing.limits import MAX_CALLS
from tooltune.parsing.python_calls import python_calls_with_error
from tooltune.schema import Parsed, ToolCall

MODES = ("strict", "substring")

R2IF_REJECTION = "I cannot complete this request because none of the available functions fits it."
"""The fixed text an R2IF answer puts inside <tool> when no function should be called."""

Tags = tuple[str, str]


@dataclass(frozen=True)
class Grammar:
    """An output format: its tags, its decoder and what callers derive from them."""

    name: str
    decode: Callable[[str, str], Parsed]
    """(text, mode) -> Parsed; may assume `text` is a string within the size bound."""
    reasoning: Tags | None = None
    """(open, close) of the reasoning block, when the format has one."""
    call: Tags | None = None
    """(open, close) of a call block, when calls are tagged."""
    two_blocks: bool = False
    """The strict format is exactly one reasoning block then one call block."""
    rejection: str | None = None
    """The fixed no-call text inside the call block (R2IF)."""
    continuation: Tags | None = None
    """(before, after) the reasoning in the prefix a student continues from (R2IF CER)."""

    @property
    def tags(self) -> tuple[str, ...]:
        return (*(self.reasoning or ()), *(self.call or ()))

    def continuation_prefix(self, reasoning: str) -> str:
        """The answer text up to the opened call block, with `reasoning` inside the reasoning block."""
        if self.continuation is None:
            raise ValueError(f"grammar {self.name!r} has no reasoning block to continue from")
        before, after = self.continuation
        return f"{before}{reasoning}{after}"

    def lenient_text(self, text: str) -> str:
        """`text` prepared for a calls-only read in substring mode: the reasoning tags the substring
        rule insists on are supplied empty in front, so only the last call block decides."""
        return "".join(self.reasoning) + text if self.two_blocks and self.reasoning else text


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


def _split_strict(text: str, think: Tags, call: Tags) -> tuple[str, str] | str:
    """ws, reasoning block, ws, call block, ws: (reasoning, block) or the reason it does not fit."""
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


def _last_block(text: str, open_tag: str, close_tag: str) -> tuple[int, int] | None:
    """Content extent of the last block found scanning left to right, each block ending at the first
    closing tag after its opening tag (the last match of the regex `open(.*?)close`, in linear time):
    a stray closing tag after a block does not move it, and an opening tag inside a block stays part
    of that block's content."""
    last, pos = None, 0
    while True:
        start = text.find(open_tag, pos)
        if start < 0:
            return last
        end = text.find(close_tag, start + len(open_tag))
        if end < 0:
            return last
        last, pos = (start + len(open_tag), end), end + len(close_tag)


def _split_substring(text: str, think: Tags, call: Tags) -> tuple[str, str] | str:
    """Original scorer: all four tags present anywhere; the last complete call block counts."""
    missing = [t for t in (*think, *call) if t not in text]
    if missing:
        return f"missing tag(s) {' '.join(missing)}"
    block = _last_block(text, *call)
    if block is None:
        return f"no complete {call[0]}…{call[1]} block"
    c0, c1 = block
    r0 = text.find(think[0])
    r1 = text.find(think[1], r0 + len(think[0]))
    reasoning = text[r0 + len(think[0]) : r1].strip() if r1 >= 0 else ""
    return reasoning, text[c0:c1]


def _split(text: str, mode: str, think: Tags, call: Tags) -> tuple[str, str] | str:
    return (_split_strict if mode == "strict" else _split_substring)(text, think, call)


_THINK: Tags = ("<think>", "</think>")
_TOOL_CALL: Tags = ("<tool_call>", "</tool_call>")
_REASON: Tags = ("<reason>", "</reason>")
_TOOL: Tags = ("<tool>", "</tool>")


def _decode_tool_n1(text: str, mode: str) -> Parsed:
    split = _split(text, mode, _THINK, _TOOL_CALL)
    if isinstance(split, str):
        return Parsed(None, None, False, split)
    reasoning, block = split
    calls, err = decode_json_calls(block, strict=mode == "strict")
    return Parsed(reasoning, calls, calls is not None, err)


def _normalize_ws(s: str) -> str:
    return " ".join(s.split())


_REJECTION_NORMALIZED = _normalize_ws(R2IF_REJECTION)


def _decode_r2if(text: str, mode: str) -> Parsed:
    split = _split(text, mode, _REASON, _TOOL)
    if isinstance(split, str):
        return Parsed(None, None, False, split)
    reasoning, block = split
    if _normalize_ws(block) == _REJECTION_NORMALIZED:
        return Parsed(reasoning, [], True, None, rejected=True)
    calls, err = decode_json_calls(block, strict=mode == "strict")
    if calls == [] and mode == "strict":
        return Parsed(
            reasoning, None, False, "empty call list: answer irrelevant requests with the rejection text"
        )
    return Parsed(reasoning, calls, calls is not None, err)


def _decode_hermes(text: str, mode: str) -> Parsed:
    calls: list[ToolCall] = []
    outside: list[str] = []
    pos = 0
    open_tag, close_tag = _TOOL_CALL
    while True:
        start = text.find(open_tag, pos)
        if start < 0:
            outside.append(text[pos:])
            break
        end = text.find(close_tag, start)
        if end < 0:
            return Parsed(None, None, False, f"unclosed {open_tag}")
        outside.append(text[pos:start])
        found, err = decode_json_calls(text[start + len(open_tag) : end], strict=False)
        if found is None:
            return Parsed(None, None, False, err)
        calls.extend(found)
        if len(calls) > MAX_CALLS:
            return Parsed(None, None, False, f"more than {MAX_CALLS} calls")
        pos = end + len(close_tag)
    rest = "".join(outside)
    if close_tag in rest:
        return Parsed(None, None, False, f"stray {close_tag}")
    reasoning = rest
    r = _one_block(rest, *_THINK)
    if not isinstance(r, str):
        reasoning = rest[r[0] : r[1]]
    return Parsed(reasoning.strip(), calls, True, None)


def _decode_python(text: str, mode: str) -> Parsed:
    calls, err = python_calls_with_error(strip_fence(text))
    return Parsed(None, calls, calls is not None, err)


def _decode_json(text: str, mode: str) -> Parsed:
    calls, err = decode_json_calls(strip_fence(text), strict=False)
    return Parsed(None, calls, calls is not None, err)


GRAMMARS: dict[str, Grammar] = {
    g.name: g
    for g in (
        Grammar("tool_n1", _decode_tool_n1, _THINK, _TOOL_CALL, two_blocks=True,
                continuation=(_THINK[0], f"{_THINK[1]}\n{_TOOL_CALL[0]}\n")),
        Grammar("r2if", _decode_r2if, _REASON, _TOOL, two_blocks=True, rejection=R2IF_REJECTION,
                continuation=(_REASON[0], f"{_REASON[1]}{_TOOL[0]}")),
        Grammar("hermes", _decode_hermes, _THINK, _TOOL_CALL),
        Grammar("python", _decode_python),
        Grammar("json", _decode_json),
    )
}
"""Every output grammar by name."""


def get_grammar(grammar: str | Grammar) -> Grammar:
    """The grammar named `grammar` (a `Grammar` passes through); ValueError names the known ones."""
    if isinstance(grammar, Grammar):
        return grammar
    try:
        return GRAMMARS[grammar]
    except (KeyError, TypeError):
        raise ValueError(f"unknown grammar {grammar!r}; known: {sorted(GRAMMARS)}") from None
