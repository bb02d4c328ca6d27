"""Completion text -> `Parsed` (reasoning, calls, format verdict). Never raises.

The parsing layer owns every output grammar (`tooltune.parsing.grammar`): rewards derive their format
term from `Parsed.format_ok`, and evaluation decodes benchmark answers through the same grammars, so
the training signal and the benchmark cannot drift apart. Each grammar also renders answers
(`Grammar.render`, the inverse of its decoder; text builders in `tooltune.parsing.render`), so SFT
targets and prompt history are written by the same object that reads them.

Model output is hostile input. Nothing here evaluates it: JSON goes through `json.loads`, Python
call syntax through a small scanner plus `ast.literal_eval` on single argument values. Every path
is linear in the input length (`str.count`/`str.find` scans, one JSON decode), a call block longer
than `MAX_BLOCK_CHARS` is refused before it is decoded (reasoning may be any length), and bracket
nesting is bounded by `MAX_DEPTH`.
"""

from __future__ import annotations

import logging
from typing import Any

from tooltune.parsing.grammar import (
    CALLS,
    GRAMMARS,
    MODES,
    R2IF_REJECTION,
    Grammar,
    Parts,
    all_tags,
    get_grammar,
    register_grammar,
)
from tooltune.parsing.json_calls import parse_json_calls
from tooltune.parsing.limits import MAX_BLOCK_CHARS, MAX_CALLS, MAX_DEPTH
from tooltune.parsing.python_calls import parse_python_calls
from tooltune.parsing.render import NO_CALL_REPLY, python_calls, python_literal
from tooltune.schema import Parsed

logger = logging.getLogger(__name__)


def _safe_decode(g: Grammar, text: str, mode: str) -> Parsed:
    try:
        return g.decode(text, mode)
    except Exception as e:  # a parser bug must never take down a training step
        logger.exception("parser failure on %d characters", len(text))
        return Parsed(None, None, False, f"internal parser error ({type(e).__name__})")


def parse_completion(text: Any, grammar: str | Grammar = "tool_n1", mode: str = "strict") -> Parsed:
    """Parse one completion under `grammar` (a name or a `Grammar`) and format `mode`.

    Unknown `grammar`/`mode` are programming errors and raise ValueError; any `text` never does.
    """
    g = get_grammar(grammar)
    if mode not in MODES:
        raise ValueError(f"unknown format mode {mode!r}; expected one of {MODES}")
    if not isinstance(text, str):
        return Parsed(None, None, False, f"completion is {type(text).__name__}, not text")
    return _safe_decode(g, text, mode)


def prefix_fails(text: Any, grammar: str | Grammar = "tool_n1", mode: str = "strict") -> bool:
    """True when no completion that starts with `text` can pass `grammar`'s format under `mode`: every
    such completion decodes to ``calls=None``, so a verdict that depends on the completion only through
    a failed format is decided and generation may stop. False when it is not known yet (and for
    grammars without a prefix rule: `Grammar.prefix_fails` is None). The rules are the decoder's own
    (`two_blocks._TwoBlocks.prefix_fails`). Never raises on `text`; linear in its length.

    `text` must be a prefix of the completion that would be scored: a generator checks the text of the
    tokens so far without a trailing incomplete character."""
    g = get_grammar(grammar)
    if mode not in MODES:
        raise ValueError(f"unknown format mode {mode!r}; expected one of {MODES}")
    if g.prefix_fails is None or not isinstance(text, str):
        return False
    try:
        return g.prefix_fails(text, mode)
    except Exception:  # a parser bug must never stop a generation: "not known" is always safe
        logger.exception("parser failure on %d characters", len(text))
        return False


def parse_calls(text: Any, grammar: str | Grammar = "tool_n1") -> Parsed:
    """Read only the calls (no format term): the call block `substring` mode reads (the last one; for
    ``toolrl`` the one ToolRL reads), whatever surrounds it, decoded under that mode's rules.

    Only `Parsed.calls` is meaningful; the correctness-only rewards and scorers use it."""
    g = get_grammar(grammar)
    if not isinstance(text, str):
        return Parsed(None, None, False, f"completion is {type(text).__name__}, not text")
    return _safe_decode(g, text, CALLS)


def parse_parts(text: Any, grammar: str | Grammar = "tool_n1", mode: str = "strict") -> Parts:
    """The two halves of the format under `mode` (`Parts`: whether the reasoning half holds, and the
    calls of the call half when it holds); the fine-grained reward scores them apart. Never raises on
    `text`."""
    g = get_grammar(grammar)
    if mode not in MODES:
        raise ValueError(f"unknown format mode {mode!r}; expected one of {MODES}")
    if not isinstance(text, str):
        return Parts(False, None)
    try:
        return g.parts(text, mode)
    except Exception:  # a parser bug must never take down a training step
        logger.exception("parser failure on %d characters", len(text))
        return Parts(False, None)


def parse_call_names(text: Any, grammar: str | Grammar = "tool_n1") -> list[str] | None:
    """The function names in the block `parse_calls` reads, including calls whose arguments cannot be
    compared (a JSON-string "arguments"): the fine-grained reward's name term. None when the block is
    not a list of call objects. Never raises on `text`."""
    g = get_grammar(grammar)
    if not isinstance(text, str):
        return None
    try:
        return g.call_names(text)
    except Exception:  # a parser bug must never take down a training step
        logger.exception("parser failure on %d characters", len(text))
        return None


__all__ = [
    "GRAMMARS",
    "MAX_CALLS",
    "MAX_BLOCK_CHARS",
    "MAX_DEPTH",
    "MODES",
    "NO_CALL_REPLY",
    "R2IF_REJECTION",
    "Grammar",
    "Parts",
    "all_tags",
    "get_grammar",
    "parse_call_names",
    "parse_calls",
    "parse_completion",
    "parse_json_calls",
    "parse_parts",
    "prefix_fails",
    "parse_python_calls",
    "python_calls",
    "python_literal",
    "register_grammar",
]
