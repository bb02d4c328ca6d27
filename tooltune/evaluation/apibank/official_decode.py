"""How an API-Bank request is read out of a completion.

Official (`api_call_extraction.py` and `evaluator_by_json.get_api_call`): the first match of
`\\[(\\w+)\\((.*)\\)\\]` anywhere in the text (one line: `.` stops at a newline; greedy: up to the line's last
`)]`) gives the API name, and the parameter pattern
`(\\w+)\\s*=\\s*['"](.+?)['"]|(\\w+)\\s*=\\s*(\\[.*\\])|(\\w+)\\s*=\\s*(\\w+)` read over the text between the
parentheses gives the arguments, every value a string, a later name overriding an earlier one. So
`API-Request: [ToolName(key='value')]` and text around the request are read; two calls in one request read
as the first call's name with both calls' arguments; a quoted value ends at its first quote of either kind,
so `attendees='['A', 'B']'` reads `[`. `official_request` reproduces that reading with `re` (the request
is located by a linear scan with the same result as the regex search).

Corrected (`corrected_request`): the located request is parsed as Python (literals only, through the
data adapter's parser, which also accepts API-Bank's quoted lists; the longest bracketed span from the
match start that parses); a request of several calls, or a second request after it, is refused; strings
keep their quotes' content whole and lists stay lists. Text that does not parse as Python is read as
officially.

Decoded calls (the grammars of other templates) pass to the tools with scalars as the text the official
reading would give (`True`, `5`) and lists and objects as decoded.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooltune.data.sources.apibank import parse_request_calls
from tooltune.evaluation.apibank.tables import SPECS
from tooltune.parsing.limits import MAX_BLOCK_CHARS
from tooltune.schema import ToolCall

_HEAD = re.compile(r"\[(\w+)\(")
_PARAM = re.compile(r"(\w+)\s*=\s*['\"](.+?)['\"]|(\w+)\s*=\s*(\[.*\])|(\w+)\s*=\s*(\w+)")
_MAX_PARSE_TRIES = 64


@dataclass(frozen=True)
class Request:
    """An API request read from a completion: API name and arguments, or why none was read."""

    name: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def locate(text: str) -> re.Match[str] | None:
    """The official `re.search(r"\\[(\\w+)\\((.*)\\)\\]", text)`, found in linear time.

    A match cannot cross a line; within a line the leftmost `[name(` wins if the line's last `)]` comes
    after it (the greedy `.*` reaches that last `)]`), and later heads in the same line end later still.
    Returns the head's match and sets nothing else; `request_span` gives the whole span.
    """
    start = 0
    for line in text.split("\n"):
        last = line.rfind(")]")
        head = _HEAD.search(line) if last >= 0 else None
        if head is not None and head.end() <= last:
            return _HEAD.match(text, start + head.start())
        start += len(line) + 1
    return None


def request_span(text: str) -> tuple[str, str, int, int] | None:
    """(name, parameter text, start, end) of the official request match, or None."""
    head = locate(text)
    if head is None:
        return None
    line_end = text.find("\n", head.start())
    line_end = len(text) if line_end < 0 else line_end
    close = text.rfind(")]", head.start(), line_end)
    return head.group(1), text[head.end():close], head.start(), close + 2


def official_arguments(params: str) -> dict[str, str]:
    """The official parameter reading: every `name=value` the pattern finds, values as strings."""
    out: dict[str, str] = {}
    for m in _PARAM.finditer(params):
        if m.group(1):
            out[m.group(1)] = m.group(2)
        elif m.group(3):
            out[m.group(3)] = m.group(4)
        elif m.group(5):
            out[m.group(5)] = m.group(6)
    return out


def official_request(text: Any) -> Request:
    """The request the official evaluator reads from a raw completion."""
    if not isinstance(text, str):
        return Request(None, error="decode_failed: completion is not text")
    if len(text) > MAX_BLOCK_CHARS:
        return Request(None, error=f"decode_failed: completion longer than {MAX_BLOCK_CHARS} characters")
    span = request_span(text)
    if span is None:
        return Request(None, error="decode_failed: no `[Name(key=value)]` request in the completion")
    name, params, _, _ = span
    return Request(name, official_arguments(params))


def corrected_request(text: Any) -> Request:
    """The request read as Python: exactly one call, literal values kept whole (see the module doc)."""
    official = official_request(text)
    if official.error:
        return official
    _, _, start, end = request_span(text)
    parsed = _parse_calls(text, start, end)
    if parsed is None:
        return official
    calls, stop = parsed
    if len(calls) != 1:
        return Request(None, error=f"one_request_one_call: {len(calls)} calls in one request")
    if locate(text[stop:]) is not None:
        return Request(None, error="one_request_one_call: a second request follows the first")
    return Request(calls[0].name, as_tool_arguments(calls[0].arguments))


def _parse_calls(text: str, start: int, end: int) -> tuple[list[ToolCall], int] | None:
    """The calls of the first bracketed request from `start` that parses as Python, and where it ends,
    trying each `)]` that closes one, longest first (the official span) then shorter."""
    ends = [end]
    at = text.rfind(")]", start, end - 2)
    while at >= 0 and len(ends) < _MAX_PARSE_TRIES:
        ends.append(at + 2)
        at = text.rfind(")]", start, at)
    for stop in ends:
        calls = parse_request_calls(text[start:stop])
        if calls:
            return calls, stop
    return None


def as_tool_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Decoded argument values as the tools receive them: scalars as text, lists and objects as decoded."""
    return {str(k): v if isinstance(v, (str, list, dict)) else str(v) for k, v in arguments.items()}


def decoded_request(calls: Sequence[ToolCall], corrected: bool) -> Request:
    """The request of calls decoded by a template's grammar. Several calls read as the official reading
    reads several calls in one request (the first name, all arguments, later ones overriding), unless
    `corrected`."""
    if not calls:
        # an empty call list parses; API-Bank fails it, but as a decision not to call, not as bad syntax
        return Request(None, error="no_call: the answer makes no call")
    if corrected and len(calls) != 1:
        return Request(None, error=f"one_request_one_call: {len(calls)} calls in one request")
    merged: dict[str, Any] = {}
    for call in calls:
        merged.update(as_tool_arguments(call.arguments))
    return Request(calls[0].name, merged)


def literal_lists(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments of a recorded call (the dialogue files write lists as text, `"['A', 'B']"`) with the text
    of each list-typed argument read as the Python literal it spells, as the recorded call received it."""
    declared = SPECS.get(name, {}).get("input_parameters", {})
    out = dict(arguments)
    for key, value in arguments.items():
        kind = declared.get(key, {}).get("type")
        if kind in ("list", "list(str)") and isinstance(value, str) and len(value) <= MAX_BLOCK_CHARS:
            try:
                parsed = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(parsed, (list, dict)):
                out[key] = parsed
    return out
