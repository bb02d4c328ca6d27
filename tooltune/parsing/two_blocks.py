"""The two-block formats: Tool-N1's ``<think>…</think>`` then ``<tool_call>[…]</tool_call>`` and R2IF's
``<reason>…</reason>`` then ``<tool>[…]</tool>`` (a reasoning block, then a call block holding a JSON
call list; R2IF's may hold the rejection text instead).

`_TwoBlocks` decodes them under the format modes `tooltune.parsing.grammar` documents (``strict``,
``substring`` and the calls-only read) and splits a completion into its reasoning half and its call
half (`Parts`, the fine-grained reward's terms). `TOOL_N1` and `R2IF` are the instances the
grammars hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from tooltune.parsing.blocks import (
    CALLS,
    REASON,
    THINK,
    TOOL,
    TOOL_CALL,
    Tags,
    _Bad,
    _last_block,
    _normalize_ws,
    _one_block,
)
from tooltune.parsing.json_calls import ORIGINAL, STRICT, decode_json_calls
from tooltune.schema import Parsed, ToolCall

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

    # --- prefixes: when no continuation can pass the format ------------------------------------------

    def prefix_fails(self, text: str, mode: str) -> bool:
        """True when every text that starts with `text` fails `mode`'s format (`decode` gives calls None),
        so a generator may stop there without changing any verdict read from the format. False means
        "not known yet"; only rules that no continuation can undo are used, each one a rule of `decode`:

        strict: a tag of either block twice (each appears exactly once); non-whitespace before the
        reasoning block, between it and the call block, or after the call block; a call tag inside the
        reasoning; an empty reasoning block; a closed call block that does not decode (what follows it
        can only be whitespace, which changes nothing, or text, which fails). substring: a second
        reasoning tag, or a call tag before the closing reasoning tag (the scorer needs both reasoning
        tags exactly once, the closing one before the first call tag); text around the blocks is allowed,
        so nothing else is final. Linear in `text`."""
        (r_open, r_close), (c_open, c_close) = self.think, self.call
        if mode == "substring":
            if text.count(r_open) > 1 or text.count(r_close) > 1:
                return True
            first_call = text.find(c_open)
            return first_call >= 0 and r_close not in text[:first_call]
        if mode != "strict":
            return False
        if any(text.count(tag) > 1 for tag in (r_open, r_close, c_open, c_close)):
            return True
        head = text.lstrip()
        if not head.startswith(r_open):
            return not r_open.startswith(head)  # still writing the opening tag, or something else
        end = head.find(r_close)
        if end < 0:
            inside = head[len(r_open) :]
            return c_open in inside or c_close in inside
        reasoning = head[len(r_open) : end]
        if c_open in reasoning or c_close in reasoning or not reasoning.strip():
            return True
        rest = head[end + len(r_close) :].lstrip()
        if not rest.startswith(c_open):
            return not c_open.startswith(rest)
        close = rest.find(c_close)
        if close < 0:
            return False  # inside the call block: its JSON is judged when it closes
        if rest[close + len(c_close) :].strip():
            return True
        return self.decode(text, "strict").calls is None

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


TOOL_N1 = _TwoBlocks(THINK, TOOL_CALL, _tool_n1_block)
R2IF = _TwoBlocks(REASON, TOOL, _r2if_block)
