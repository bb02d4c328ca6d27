"""ToolRL's output format (Qian et al. 2025): `<think>R</think>`, then `<tool_call>` with one JSON object
per line (`{"name": …, "parameters": {…}}`) and/or a `<response>` block; its format rule is about the
tags and the whitespace between them, not about decodable JSON."""

from __future__ import annotations

from tooltune.parsing.blocks import CALLS, _Bad
from tooltune.parsing.blocks import RESPONSE as _RESPONSE
from tooltune.parsing.blocks import THINK as _THINK
from tooltune.parsing.blocks import TOOL_CALL as _TOOL_CALL
from tooltune.parsing.json_calls import decode_json_lines
from tooltune.schema import Parsed, ToolCall


def _toolrl_block(text: str) -> tuple[int, int] | None:
    """The block ToolRL reads: both call tags somewhere in the text, then from the first opening tag to
    the next call tag of either kind (to the end of the text when none follows)."""
    open_, close = _TOOL_CALL
    if open_ not in text or close not in text:
        return None
    start = text.find(open_) + len(open_)
    ends = [e for e in (text.find(open_, start), text.find(close, start)) if e >= 0]
    return start, min(ends) if ends else len(text)


def _toolrl_calls(text: str) -> tuple[list[ToolCall] | None, str | None]:
    """The calls of ToolRL's block; [] when the text has no call tag at all (an answer in words)."""
    if _TOOL_CALL[0] not in text:
        return [], None
    block = _toolrl_block(text)
    if block is None:
        return None, f"no {_TOOL_CALL[1]} to close {_TOOL_CALL[0]}"
    return decode_json_lines(text[block[0] : block[1]])


def _sep_ok(seg: str, strict: bool) -> bool:
    """ToolRL's separator between blocks: one newline (`strict`), or any whitespace."""
    return seg == "\n" if strict else not seg.strip()


def _toolrl_reasoning(s: str, p: int, strict: bool) -> str | _Bad:
    """The reasoning of stripped text `s` whose next block starts at `p`: `s` starts with ``<think>``
    and the last ``</think>`` before `p` is followed by the separator alone."""
    (t_open, t_close) = _THINK
    k = s.rfind(t_close, len(t_open), p)
    if k < 0 or not _sep_ok(s[k + len(t_close) : p], strict):
        return _Bad(1, f"{t_close} and a newline must come right before {s[p : s.find('>', p) + 1]}")
    return s[len(t_open) : k].strip()


def _toolrl_response_ok(s: str, rest: str) -> bool:
    """`rest`, the end of stripped text `s`, is the one response block of `s`."""
    a_open, a_close = _RESPONSE
    return (
        rest.startswith(a_open)
        and rest.endswith(a_close)
        and len(rest) >= len(a_open) + len(a_close)
        and s.count(a_open) == 1
        and s.count(a_close) == 1
    )


def _toolrl_shape(text: str, mode: str) -> str | _Bad:
    """ToolRL's format rule on the stripped text (its regular expressions, checked in linear time):
    ``<think>R</think>`` then ``\\n<tool_call>\\n…\\n</tool_call>`` optionally followed by
    ``\\n<response>…</response>``, or ``\\n<response>…</response>`` alone, or nothing; call and response
    tags exactly once each when present. ``substring`` accepts any whitespace where ``strict`` wants one
    newline. Returns the reasoning or why the format fails."""
    s = text.strip()
    strict = mode == "strict"
    (t_open, t_close), (c_open, c_close), (a_open, a_close) = _THINK, _TOOL_CALL, _RESPONSE
    if not s.startswith(t_open):
        return _Bad(1, f"the answer must start with {t_open}")
    i = s.find(c_open)
    if i >= 0:
        if s.count(c_open) != 1 or s.count(c_close) != 1:
            return _Bad(0, f"expected one {c_open} and one {c_close}")
        j = s.find(c_close)
        if j < i:
            return _Bad(1, f"{c_close} comes before {c_open}")
        inner = s[i + len(c_open) : j]
        if strict and not (len(inner) >= 2 and inner[0] == "\n" and inner[-1] == "\n"):
            return _Bad(1, f"the calls must sit on their own lines between {c_open} and {c_close}")
        rest = s[j + len(c_close) :]
        if rest:
            a = rest.find(a_open)
            if a < 0 or not _sep_ok(rest[:a], strict) or not _toolrl_response_ok(s, rest[a:]):
                return _Bad(1, f"only a {a_open}…{a_close} block may follow {c_close}")
        return _toolrl_reasoning(s, i, strict)
    a = s.find(a_open)
    if a >= 0:
        if not _toolrl_response_ok(s, s[a:]):
            return _Bad(1, f"expected one {a_open}…{a_close} block at the end")
        return _toolrl_reasoning(s, a, strict)
    if not s.endswith(t_close) or len(s) < len(t_open) + len(t_close):
        return _Bad(1, f"an answer without {c_open} or {a_open} is one {t_open}…{t_close} block")
    return s[len(t_open) : -len(t_close)].strip()


def decode_toolrl(text: str, mode: str) -> Parsed:
    if mode == CALLS:
        calls, err = _toolrl_calls(text)
        return Parsed(None, calls, calls is not None, err)
    r = _toolrl_shape(text, mode)
    if isinstance(r, _Bad):
        return Parsed(None, None, False, r.why)
    calls, err = _toolrl_calls(text)
    return Parsed(r, calls, True, err)


