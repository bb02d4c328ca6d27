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

Rendering is the inverse of decoding and lives on the same object: `Grammar.render(calls, reasoning)`
writes the answer text the grammar reads back (SFT targets, earlier assistant turns in a prompt, the
gold self-check). Every grammar has a renderer; `register_grammar` refuses one without.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tooltune.config import Registry
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
from tooltune.parsing.json_calls import LENIENT, decode_json_calls, json_call_names, strip_fence
from tooltune.parsing.limits import MAX_CALLS
from tooltune.parsing.python_calls import python_calls_with_error
from tooltune.parsing.render import (
    NO_CALL_REPLY,
    json_call,
    json_calls,
    json_line,
    python_calls,
    r2if_reasoning,
    strip_tags,
    tool_n1_reasoning,
)
from tooltune.parsing.toolrl import decode_toolrl
from tooltune.parsing.two_blocks import R2IF, R2IF_REJECTION, TOOL_N1, Parts
from tooltune.schema import Parsed, ToolCall

MODES = ("strict", "substring")

Renderer = Callable[["Grammar", list[ToolCall], "str | None"], str]
"""(grammar, calls, reasoning) -> answer text; reasoning None: no reasoning block (the call block alone)."""

ReasoningWriter = Callable[[Sequence[ToolCall]], str]
"""calls -> the reasoning text of an answer whose data has none."""


@dataclass(frozen=True)
class Grammar:
    """An output format: its tags, its decoder, its renderer and what callers derive from them."""

    name: str
    decode: Callable[[str, str], Parsed]
    """(text, mode) -> Parsed, `mode` one of `MODES` or `CALLS`; may assume `text` is a string."""
    renderer: Renderer
    """(grammar, calls, reasoning) -> the answer text `decode` reads back; reasoning None: no reasoning
    block. Called through `render`, which prepares the reasoning."""
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
    default_reasoning: ReasoningWriter | None = None
    """Writes the reasoning of a rendered answer whose data has none (None: no reasoning is written)."""
    prefix_fails: Callable[[str, str], bool] | None = None
    """(text, mode) -> True when every text starting with `text` fails the mode's format (see
    `tooltune.parsing.prefix_fails`); None: the grammar never knows before the end."""

    @property
    def tags(self) -> tuple[str, ...]:
        """The reasoning and call tags (the tiny tokenizer's tag tokens; escaped in rendered JSON)."""
        return (*(self.reasoning or ()), *(self.call or ()))

    def render(
        self,
        calls: Sequence[ToolCall],
        reasoning: str | None = None,
        *,
        include_reasoning: bool = True,
        fill_reasoning: bool = True,
        default_reasoning: ReasoningWriter | None = None,
    ) -> str:
        """The answer text that gives `calls` in this grammar (`decode` reads the same calls back).

        `reasoning` is cleaned of every grammar's tags (so it cannot open or close a block). Without
        one (or with one that is empty once cleaned) the reasoning is written by `default_reasoning`
        (a template's own), else by the grammar's, unless `fill_reasoning` is False: then the answer is
        the call block alone, as with `include_reasoning=False`. Grammars without a reasoning block
        ignore it."""
        tags = all_tags()
        calls = list(calls)
        text = strip_tags(reasoning, tags) if reasoning and include_reasoning else ""
        keep = include_reasoning and (bool(text) or fill_reasoning)
        if keep and not text:
            writer = default_reasoning or self.default_reasoning
            text = strip_tags(writer(calls), tags) if writer is not None else ""
        return self.renderer(self, calls, text if keep else None)

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


# --- renderers ------------------------------------------------------------------------------------------


def _render_tool_n1(g: Grammar, calls: list[ToolCall], reasoning: str | None) -> str:
    (r_open, r_close), (c_open, c_close) = g.reasoning or ("", ""), g.call or ("", "")
    block = f"{c_open}\n{json_calls(calls, all_tags())}\n{c_close}"
    return block if reasoning is None else f"{r_open}{reasoning}{r_close}\n{block}"


def _render_r2if(g: Grammar, calls: list[ToolCall], reasoning: str | None) -> str:
    (r_open, r_close), (c_open, c_close) = g.reasoning or ("", ""), g.call or ("", "")
    block = f"{c_open}{json_calls(calls, all_tags()) if calls else g.rejection}{c_close}"
    return block if reasoning is None else f"{r_open}\n{reasoning}\n{r_close}\n{block}"


def _render_toolrl(g: Grammar, calls: list[ToolCall], reasoning: str | None) -> str:
    (r_open, r_close), (c_open, c_close) = g.reasoning or ("", ""), g.call or ("", "")
    head = "" if reasoning is None else f"{r_open}{reasoning}{r_close}\n"
    if not calls:
        a_open, a_close = g.response or ("", "")
        return f"{head}{a_open}{NO_CALL_REPLY}{a_close}"
    tags = all_tags()
    lines = "\n".join(json_line({"name": c.name, "parameters": c.arguments}, tags) for c in calls)
    return f"{head}{c_open}\n{lines}\n{c_close}"


def _render_hermes(g: Grammar, calls: list[ToolCall], reasoning: str | None) -> str:
    c_open, c_close = g.call or ("", "")
    tags = all_tags()
    blocks = "\n".join(f"{c_open}\n{json_call(c, tags)}\n{c_close}" for c in calls)
    return "\n".join(x for x in (reasoning or "", blocks) if x)


def _render_python(g: Grammar, calls: list[ToolCall], reasoning: str | None) -> str:
    return python_calls(calls)


def _render_json(g: Grammar, calls: list[ToolCall], reasoning: str | None) -> str:
    return json_calls(calls, all_tags())


# --- the registry ----------------------------------------------------------------------------------------

GRAMMARS: Registry[Grammar] = Registry("grammar")
"""Every output grammar by name (`register_grammar` adds one)."""


@functools.lru_cache(maxsize=1)
def all_tags() -> tuple[str, ...]:
    """Every tag of every registered grammar, response tags included: removed from reasoning text and
    escaped inside rendered JSON, so that no rendered value opens or closes a block of any grammar."""
    return tuple(dict.fromkeys(t for g in GRAMMARS.values() for t in (*g.tags, *(g.response or ()))))


def register_grammar(grammar: Grammar) -> Grammar:
    """Add `grammar` under its name and return it.

    A grammar must render what it decodes: one without a callable `renderer` is refused here
    (TypeError), so that prompt templates, SFT targets and the gold self-check never fall back to
    another format. A second, different grammar under a registered name is a ValueError."""
    if not isinstance(grammar, Grammar):
        raise TypeError(f"expected a Grammar, got {type(grammar).__name__}")
    if not callable(grammar.renderer):
        raise TypeError(
            f"grammar {grammar.name!r} has no renderer: give Grammar(..., renderer=f) with "
            "f(grammar, calls, reasoning) -> the answer text its decoder reads back"
        )
    if GRAMMARS.get(grammar.name, grammar) != grammar:
        raise ValueError(f"grammar {grammar.name!r} is already registered")
    GRAMMARS.add(grammar.name, grammar, replace=True)
    all_tags.cache_clear()
    return grammar


for _grammar in (
    Grammar("tool_n1", TOOL_N1.decode, _render_tool_n1, _THINK, _TOOL_CALL, two_blocks=True,
            continuation=(_THINK[0], f"{_THINK[1]}\n{_TOOL_CALL[0]}\n"), split=TOOL_N1.parts,
            default_reasoning=tool_n1_reasoning, prefix_fails=TOOL_N1.prefix_fails),
    Grammar("r2if", R2IF.decode, _render_r2if, _REASON, _TOOL, two_blocks=True, rejection=R2IF_REJECTION,
            continuation=(_REASON[0], f"{_REASON[1]}{_TOOL[0]}"), split=R2IF.parts,
            default_reasoning=r2if_reasoning, prefix_fails=R2IF.prefix_fails),
    Grammar("toolrl", decode_toolrl, _render_toolrl, _THINK, _TOOL_CALL, response=_RESPONSE,
            default_reasoning=tool_n1_reasoning),
    Grammar("hermes", _decode_hermes, _render_hermes, _THINK, _TOOL_CALL),
    Grammar("python", _decode_python, _render_python),
    Grammar("json", _decode_json, _render_json),
):
    register_grammar(_grammar)


def get_grammar(grammar: str | Grammar, key: str = "") -> Grammar:
    """The grammar named `grammar` (a `Grammar` passes through); `UnknownName` (naming `key`, default
    ``grammar``) names the closest registered grammars."""
    if isinstance(grammar, Grammar):
        return grammar
    return GRAMMARS.get(grammar if isinstance(grammar, str) else repr(grammar), key=key)
