"""Output grammars: one `Grammar` object per answer format, the single owner of its tags.

A grammar knows its reasoning and call tags, how to decode a call block, the fixed rejection text
(R2IF), the prefix a CER student continues from, how to read the calls alone (no format term), and
how its format splits into a reasoning half and a call half (the fine-grained reward's terms).
Prompt templates hold a grammar; rewards, the CER prefix and the entropy-region tagger read the tags
from it, so no other module spells a tag.

Grammars:
- ``tool_n1``: ``<think>R</think>`` then ``<tool_call>[{"name": …, "arguments": {…}}, …]</tool_call>``
  (Tool-N1, arXiv 2505.00024). A single object is a one-call list; ``[]`` is an explicit no-call.
- ``r2if``: ``<reason>R</reason><tool>[…]</tool>``, or the rejection text `R2IF_REJECTION` inside
  ``<tool>`` for irrelevant requests (R2IF).
- ``toolrl``: ``<think>R</think>\\n<tool_call>\\n{"name": …, "parameters": {…}}\\n…\\n</tool_call>``,
  one JSON object per line, optionally followed by ``\\n<response>…</response>``; an answer without a
  call is ``<think>R</think>\\n<response>…</response>`` (ToolRL, Qian et al. 2025).
- ``hermes``: one JSON object per ``<tool_call>…</tool_call>`` block, free text elsewhere.
- ``python``: a Python-call list ``[func(a=1, b='x'), mod.f()]`` (BFCL, ACEBench, ToolACE; names may
  contain dots and spaces).
- ``json``: a bare JSON list of call objects.

Format modes (`MODES`):
- ``strict``: exactly one reasoning block with non-empty reasoning, then exactly one call block,
  nothing but whitespace around them, the block decoded under `json_calls.STRICT` (defeats the
  repeated-``<think>`` and trailing-text reward hacks). For ``toolrl``: ToolRL's own format rule,
  whitespace included.
- ``substring``: the rules of Tool-N1's released scorer. The last complete call block counts (the last
  match of the non-greedy pattern ``<tool_call>(.*?)</tool_call>``) and is decoded under
  `json_calls.ORIGINAL`; ``<think>`` and ``</think>`` each appear exactly once and ``</think>`` comes
  before the first ``<tool_call>`` (the two format rules of the Trinity-RFT adaptation of that scorer,
  which the paper's format, one reasoning block then the call, also states); any other text may
  surround the blocks. For ``toolrl``: the same blocks in the same order, any whitespace between them.

`CALLS` is the internal mode of `tooltune.parsing.parse_calls`: the call block alone, read as
``substring`` reads it (``toolrl``: the block ToolRL reads), no format term.

Every decoder returns ``calls=None`` when the format fails (evaluation reads ``calls is None`` as a
failed answer); only ``toolrl``, whose format is about tags, may pass the format with ``calls=None``
when its block does not decode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from tooltune.parsing.blocks import (
    CALLS,
    Tags,
    _Bad,
    _last_block,
    _normalize_ws,
    _one_block,
)
from tooltune.parsing.blocks import (
    REASON as _REASON,
)
from tooltune.parsing.blocks import (
    RESPONSE as _RESPONSE,
)
from tooltune.parsing.blocks import (
    THINK as _THINK,
)
from tooltune.parsing.blocks import (
    TOOL as _TOOL,
)
from tooltune.parsing.blocks import (
    TOOL_CALL as _TOOL_CALL,
)
from tooltune.parsing.json_calls import (
    LENIENT,
    ORIGINAL,
    STRICT,
    decode_json_calls,
    json_call_names,
    strip_fence,
)
from tooltune.parsing.limits import MAX_CALLS
from tooltune.parsing.python_calls import python_calls_with_error
from tooltune.parsing.toolrl import decode_toolrl
from tooltune.schema import Parsed, ToolCall

MODES = ("strict", "substring")
R2IF_REJECTION = "None of function can be used"
"""The fixed text an R2IF answer puts inside <tool> when no function should be called: the R2IF paper's
exact wording (kept as written there, so that answers trained on its data and prompts parse)."""

class Parts(NamedTuple):
    """A completion's format split into its halves (the fine-grained reward's terms).

    `reasoning_ok`: the reasoning half of the mode's format holds. `calls`: the calls of the call half
    when that half holds (under the mode's call-block rules), else None. The mode's format holds
    exactly when both halves do."""

    reasoning_ok: bool
    calls: list[ToolCall] | None


@dataclass(frozen=True)
class Grammar:
    """An output format: its tags, its decoder and what callers derive from them."""

    name: str
    decode: Callable[[str, str], Parsed]
    """(text, mode) -> Parsed, `mode` one of `MODES` or `CALLS`; may assume `text` is a string."""
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
    response: Tags | None = None
    """(open, close) of a free-text answer block (ToolRL's ``<response>``); not among `tags`."""
    split: Callable[[str, str], Parts] | None = None
    """(text, mode) -> Parts, for grammars whose format has a reasoning half and a call half."""

    @property
    def tags(self) -> tuple[str, ...]:
        """The reasoning and call tags (the tiny tokenizer's tag tokens; escaped in rendered JSON)."""
        return (*(self.reasoning or ()), *(self.call or ()))

    def continuation_prefix(self, reasoning: str) -> str:
        """The answer text up to the opened call block, with `reasoning` inside the reasoning block."""
        if self.continuation is None:
            raise ValueError(f"grammar {self.name!r} has no reasoning block to continue from")
        before, after = self.continuation
        return f"{before}{reasoning}{after}"

    def parts(self, text: str, mode: str) -> Parts:
        """The halves of `text`'s format under `mode` (see `Parts`). Grammars without the two halves
        count the whole format as the reasoning half: (format ok, calls when it is)."""
        if self.split is not None:
            return self.split(text, mode)
        p = self.decode(text, mode)
        return Parts(p.format_ok, p.calls if p.format_ok else None)

    def call_names(self, text: str) -> list[str] | None:
        """The function names of the call block `parse_calls` reads, including calls whose arguments
        cannot be compared (the fine-grained name term); None when the block is not a call list."""
        if self.two_blocks and self.call:
            block = _last_block(text, *self.call)
            if block is None:
                return None
            content = text[block[0] : block[1]]
            if self.rejection and _normalize_ws(content) == _normalize_ws(self.rejection):
                return []
            return json_call_names(content)
        calls = self.decode(text, CALLS).calls
        return None if calls is None else [c.name for c in calls]


BlockDecoder = Callable[[str, str], tuple[list[ToolCall] | None, str | None, bool]]
"""(call block content, json rules) -> (calls, error, rejected)."""


@dataclass(frozen=True)
class _TwoBlocks:
    """The Tool-N1-style format: a reasoning block, then a call block holding a JSON call list."""

    think: Tags
    call: Tags
    block: BlockDecoder

    # --- strict: exactly one of each block, whitespace around, strict JSON ---------------------------

    def strict_reasoning(self, text: str) -> str | _Bad:
        """The reasoning half: the text before the call block (all of it when there is none) is one
        non-empty reasoning block with only whitespace around it."""
        think, call_open = self.think, self.call[0]
        r = _one_block(text, *think)
        if isinstance(r, _Bad):
            return r
        r0, r1 = r
        p = text.find(call_open)
        p = len(text) if p < 0 else p
        end = r1 + len(think[1])
        if end > p:
            return _Bad(1, f"{call_open} block must follow the {think[0]} block")
        if text[: r0 - len(think[0])].strip():
            return _Bad(1, f"text before {think[0]}")
        if text[end:p].strip():
            return _Bad(1, f"text between {think[1]} and {call_open}")
        reasoning = text[r0:r1].strip()
        if not reasoning:
            return _Bad(1, f"empty {think[0]} block")
        return reasoning

    def strict_call(self, text: str) -> tuple[int, int] | _Bad:
        """The call half: exactly one call block with nothing but whitespace after it."""
        c = _one_block(text, *self.call)
        if isinstance(c, _Bad):
            return c
        if text[c[1] + len(self.call[1]) :].strip():
            return _Bad(1, f"text after {self.call[1]}")
        return c

    # --- substring: the original scorer's rules --------------------------------------------------------

    def original_reasoning(self, text: str) -> str | _Bad:
        """The reasoning half: both reasoning tags, each exactly once, the closing one before the
        first call tag; the reasoning is what lies between them (empty if they are in reverse)."""
        (open_, close), call_open = self.think, self.call[0]
        n_open, n_close = text.count(open_), text.count(close)
        if n_open != 1 or n_close != 1:
            return _Bad(0, f"expected one {open_} and one {close}, found {n_open} and {n_close}")
        r0, r1 = text.find(open_), text.find(close)
        first_call = text.find(call_open)
        if 0 <= first_call < r1:
            return _Bad(1, f"{close} must come before the first {call_open}")
        return text[r0 + len(open_) : r1].strip() if r0 < r1 else ""

    def original_call(self, text: str) -> tuple[list[ToolCall] | None, str | None, bool]:
        """The call half: the last complete call block, decoded under the original rules."""
        c = _last_block(text, *self.call)
        if c is None:
            return None, f"no complete {self.call[0]}…{self.call[1]} block", False
        return self.block(text[c[0] : c[1]], ORIGINAL)

    # --- grammar interface ---------------------------------------------------------------------------

    def decode(self, text: str, mode: str) -> Parsed:
        if mode == CALLS:
            calls, err, rejected = self.original_call(text)
            return Parsed(None, calls, calls is not None, err, rejected=rejected)
        if mode == "strict":
            r = self.strict_reasoning(text)
            if isinstance(r, _Bad) and r.stage == 0:  # reported first whatever the call half holds
                return Parsed(None, None, False, r.why)
            c = self.strict_call(text)
            if isinstance(r, _Bad) or isinstance(c, _Bad):
                bad = [x for x in (r, c) if isinstance(x, _Bad)]
                return Parsed(None, None, False, min(bad, key=lambda b: b.stage).why)
            calls, err, rejected = self.block(text[c[0] : c[1]], STRICT)
            return Parsed(r, calls, calls is not None, err, rejected=rejected)
        calls, err, rejected = self.original_call(text)
        if calls is None:
            return Parsed(None, None, False, err)
        r = self.original_reasoning(text)
        if isinstance(r, _Bad):
            return Parsed(None, None, False, r.why)
        return Parsed(r, calls, True, None, rejected=rejected)

    def parts(self, text: str, mode: str) -> Parts:
        if mode == "strict":
            reasoning_ok = isinstance(self.strict_reasoning(text), str)
            c = self.strict_call(text)
            calls = None if isinstance(c, _Bad) else self.block(text[c[0] : c[1]], STRICT)[0]
            return Parts(reasoning_ok, calls)
        return Parts(isinstance(self.original_reasoning(text), str), self.original_call(text)[0])


def _tool_n1_block(block: str, rules: str) -> tuple[list[ToolCall] | None, str | None, bool]:
    calls, err = decode_json_calls(block, rules)
    return calls, err, False


_REJECTION_NORMALIZED = _normalize_ws(R2IF_REJECTION)


def _r2if_block(block: str, rules: str) -> tuple[list[ToolCall] | None, str | None, bool]:
    if _normalize_ws(block) == _REJECTION_NORMALIZED:
        return [], None, True
    calls, err = decode_json_calls(block, rules)
    if calls == [] and rules == STRICT:
        return None, "empty call list: answer irrelevant requests with the rejection text", False
    return calls, err, False


_TOOL_N1 = _TwoBlocks(_THINK, _TOOL_CALL, _tool_n1_block)
_R2IF = _TwoBlocks(_REASON, _TOOL, _r2if_block)


# --- hermes, python, json ------------------------------------------------------------------------------


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
        found, err = decode_json_calls(text[start + len(open_tag) : end], LENIENT)
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
    if not isinstance(r, _Bad):
        reasoning = rest[r[0] : r[1]]
    return Parsed(reasoning.strip(), calls, True, None)


def _decode_python(text: str, mode: str) -> Parsed:
    calls, err = python_calls_with_error(strip_fence(text))
    return Parsed(None, calls, calls is not None, err)


def _decode_json(text: str, mode: str) -> Parsed:
    calls, err = decode_json_calls(strip_fence(text), LENIENT)
    return Parsed(None, calls, calls is not None, err)


GRAMMARS: dict[str, Grammar] = {
    g.name: g
    for g in (
        Grammar("tool_n1", _TOOL_N1.decode, _THINK, _TOOL_CALL, two_blocks=True,
                continuation=(_THINK[0], f"{_THINK[1]}\n{_TOOL_CALL[0]}\n"), split=_TOOL_N1.parts),
        Grammar("r2if", _R2IF.decode, _REASON, _TOOL, two_blocks=True, rejection=R2IF_REJECTION,
                continuation=(_REASON[0], f"{_REASON[1]}{_TOOL[0]}"), split=_R2IF.parts),
        Grammar("toolrl", decode_toolrl, _THINK, _TOOL_CALL, response=_RESPONSE),
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
