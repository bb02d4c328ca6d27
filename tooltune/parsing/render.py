"""Text builders for answer rendering: the pieces each grammar's renderer (`tooltune.parsing.grammar`)
puts together, so that a rendered answer is exactly what the grammar's decoder reads back.

- JSON call text (`json_calls`, `json_call`, `json_line`): compact JSON with ``<`` written as ``\\u003c``
  when the text holds a tag of any grammar (lossless: ``<`` only occurs inside JSON strings), so that a
  value such as ``"</tool_call>"`` cannot close a block early;
- Python call text (`python_calls`, `python_literal`): ``[f(a=1, b='x')]``, read back by
  `ast.literal_eval` on each value;
- default reasoning (`tool_n1_reasoning`, `r2if_reasoning`) for answers whose data has none;
- `NO_CALL_REPLY`, the free-text reply of a ToolRL or ``hermes`` answer that makes no call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from tooltune.schema import ToolCall

NO_CALL_REPLY = "None of the available tools can help with this request."
"""The ``<response>`` of a ToolRL-format answer that makes no call, and the plain reply of a ``native``
(``hermes``) one (the data has no reply text)."""


def escape_tags(text: str, tags: Iterable[str]) -> str:
    """JSON `text` with ``<`` escaped as ``\\u003c`` when it contains any of `tags`, else unchanged."""
    return text.replace("<", "\\u003c") if any(t in text for t in tags) else text


def json_calls(calls: Sequence[ToolCall], tags: Iterable[str]) -> str:
    """The calls as one JSON list of ``{"name", "arguments"}`` objects (tags escaped)."""
    return escape_tags(json.dumps([c.to_dict() for c in calls], ensure_ascii=False), tags)


def json_call(call: ToolCall, tags: Iterable[str]) -> str:
    """One call as a JSON ``{"name", "arguments"}`` object (tags escaped)."""
    return json_calls([call], tags)[1:-1]


def json_line(obj: Any, tags: Iterable[str]) -> str:
    """Any JSON value on one line (tags escaped)."""
    return escape_tags(json.dumps(obj, ensure_ascii=False), tags)


def strip_tags(text: str, tags: Iterable[str]) -> str:
    """`text` without any of `tags`, stripped: reasoning that cannot open or close a block."""
    for t in tags:
        text = text.replace(t, "")
    return text.strip()


def python_literal(v: Any) -> str:
    """Python literal text for a JSON value (round-trips through ast.literal_eval)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{python_literal(k)}: {python_literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(python_literal(x) for x in v) + "]"
    return repr(v)


def python_calls(calls: Sequence[ToolCall]) -> str:
    """The calls as a Python call list, ``[f(a=1, b='x'), g()]`` (BFCL's and ACEBench's answer form)."""
    inner = ", ".join(
        f"{c.name}(" + ", ".join(f"{k}={python_literal(v)}" for k, v in c.arguments.items()) + ")"
        for c in calls
    )
    return f"[{inner}]"


def tool_n1_reasoning(calls: Sequence[ToolCall]) -> str:
    """A one-sentence reasoning naming the called functions (or saying that none is called)."""
    if not calls:
        return "No available tool can serve this request, so no call is made."
    names = ", ".join(dict.fromkeys(c.name for c in calls))
    return f"The request is served by calling {names}."


def r2if_reasoning(calls: Sequence[ToolCall]) -> str:
    """R2IF's two steps: Step1 names the functions, Step2 has a ``For #name#:`` block per call with one
    ``- param: value`` line per argument (the form `tooltune.rewards.smv.parse_step2` reads)."""
    if not calls:
        return "Step1: none of the available functions serves this request.\nStep2: no call is made."
    names = ", ".join(f"#{n}#" for n in dict.fromkeys(c.name for c in calls))
    lines = [f"Step1: the request is served by {names}.", "Step2:"]
    for c in calls:
        lines.append(f"For #{c.name}#:")
        lines += [
            f"- {k}: {json.dumps(v, ensure_ascii=False)} as stated in the request."
            for k, v in c.arguments.items()
        ]
    return "\n".join(lines)
