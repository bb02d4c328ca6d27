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

import logging
from typing import Any

from tooltune.parsing.json_calls import decode_json_calls, parse_json_calls, strip_fence
from tooltune.parsing.limits import MAX_CALLS, MAX_CHARS, MAX_DEPTH
from tooltune.parsing.python_calls import parse_python_calls, python_calls_with_error
from tooltune.schema import Parsed, ToolCall

logger = logging.getLogger(__name__)

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


def _split_tagged(text: str, mode: str, think: tuple[str, str], call: tuple[str, str]) -> tuple | str:
    """(reasoning, call block) under `mode`'s rules, or the reason the text does not fit."""
    return (_parse_tagged_strict if mode == "strict" else _parse_tagged_substring)(text, think, call)


def _parse_tool_n1(text: str, mode: str) -> Parsed:
    split = _split_tagged(text, mode, ("<think>", "</think>"), ("<tool_call>", "</tool_call>"))
    if isinstance(split, str):
        return Parsed(None, None, False, split)
    reasoning, block = split
    calls, err = decode_json_calls(block, strict=mode == "strict")
    return Parsed(reasoning, calls, calls is not None, err)


def _normalize_ws(s: str) -> str:
    return " ".join(s.split())


_REJECTION_NORMALIZED = _normalize_ws(R2IF_REJECTION)


def _parse_r2if(text: str, mode: str) -> Parsed:
    split = _split_tagged(text, mode, ("<reason>", "</reason>"), ("<tool>", "</tool>"))
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
        found, err = decode_json_calls(text[start + len("<tool_call>") : end], strict=False)
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
    calls, err = python_calls_with_error(strip_fence(text))
    return Parsed(None, calls, calls is not None, err)


def _parse_json_grammar(text: str, mode: str) -> Parsed:
    calls, err = decode_json_calls(strip_fence(text), strict=False)
    return Parsed(None, calls, calls is not None, err)


__all__ = [
    "GRAMMARS",
    "MAX_CALLS",
    "MAX_CHARS",
    "MAX_DEPTH",
    "MODES",
    "R2IF_REJECTION",
    "TEMPLATE_GRAMMAR",
    "grammar_of",
    "parse_completion",
    "parse_json_calls",
    "parse_python_calls",
    "register_grammar_alias",
]

_PARSERS = {
    "tool_n1": _parse_tool_n1,
    "r2if": _parse_r2if,
    "hermes": _parse_hermes,
    "python": _parse_python_grammar,
    "json": _parse_json_grammar,
}
