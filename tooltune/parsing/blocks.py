"""Block scanning shared by the tagged grammars: tags, one or the last `open…close` block, why a half
of a format fails. Every scan is linear (`str.count` / `str.find`)."""

from __future__ import annotations

from typing import NamedTuple

CALLS = "calls"
"""Decode mode of `parse_calls`: only the calls, no format term."""

Tags = tuple[str, str]

THINK: Tags = ("<think>", "</think>")
TOOL_CALL: Tags = ("<tool_call>", "</tool_call>")
REASON: Tags = ("<reason>", "</reason>")
TOOL: Tags = ("<tool>", "</tool>")
RESPONSE: Tags = ("<response>", "</response>")


class _Bad(NamedTuple):
    """Why a half of the format fails; count errors (stage 0) are reported before placement errors."""

    stage: int
    why: str


def _one_block(text: str, open_tag: str, close_tag: str) -> tuple[int, int] | _Bad:
    """(start, end) of the single block's content, or why there is not exactly one."""
    n_open, n_close = text.count(open_tag), text.count(close_tag)
    if n_open != 1 or n_close != 1:
        found = f"found {n_open} {open_tag} and {n_close} {close_tag}"
        return _Bad(0, f"expected one {open_tag}…{close_tag} block, {found}")
    start = text.find(open_tag) + len(open_tag)
    end = text.find(close_tag)
    if end < start:
        return _Bad(1, f"{close_tag} comes before {open_tag}")
    return start, end


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


def _normalize_ws(s: str) -> str:
    return " ".join(s.split())
