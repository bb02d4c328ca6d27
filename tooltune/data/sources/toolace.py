"""ToolACE (Team-ACE/ToolACE): multi-turn dialogues, tools embedded in the system text.

Raw record: {"system": "...Here is a list of functions in JSON format that you can invoke:\\n[{...}]...",
"conversations": [{"from": "user"|"assistant"|"tool", "value": str}, ...]}. Assistant tool calls are
Python-call strings (`[Get Weather(city="Paris, FR"), f(a=[1, 2])]`, names with spaces and dots,
values with commas, parentheses and quotes) decoded with `tooltune.parsing.parse_python_calls`, which
walks the string with a quote- and bracket-aware scanner instead of the reference implementation's
regex. Tool turns are JSON strings of results.

Tool-N1 segmentation: every assistant tool-call step becomes one sample whose history holds the
preceding user turns, earlier calls and tool results; text turns optionally become no-call samples.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from tooltune.data.sources.base import (
    Position,
    RawRecord,
    RecordError,
    Rejection,
    field_error,
    make_sample,
    record_id,
    require_str,
    tools_from_list,
)
from tooltune.data.sources.reading import iter_input
from tooltune.parsing import parse_python_calls
from tooltune.schema import RecordValueError, Sample, raw_decode_record

NAME = "toolace"
HUB_ID = "Team-ACE/ToolACE"
REQUIRED_FIELDS = ("system", "conversations")
TOOLS_MARKER = "Here is a list of functions in JSON format that you can invoke:"
_ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
}
# The stock instructions around the tool list: our templates give their own, so only any other
# system text (a persona, the current date) is kept as the system message.
_BOILERPLATE = (
    "You are an expert in composing functions. You are given a question and a set of possible functions.",
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose.",
    "If none of the function can be used, point it out. If the given question lacks the parameters "
    "required by the function,",
    "also point it out. You should only return the function call in tools call sections.",
    "Should you decide to return the function call(s).",
    "Put it in the format of [func1(params_name=params_value, params_name2=params_value2...), func2(params)]",
    "NO other text MUST be included.",
)


def read(spec: str, split: str = "train", lenient: bool = False) -> Iterator[RawRecord]:
    return iter_input(spec, REQUIRED_FIELDS, split=split, lenient=lenient)


def is_multi_turn(raw: Any) -> bool:
    conv = raw.get("conversations") if isinstance(raw, Mapping) else None
    return isinstance(conv, list) and len(conv) > 2


def extract_tools(system: str) -> tuple[list[Any], str]:
    """The JSON tool array after the marker, and the remaining system text (boilerplate removed).

    `raw_decode` at the first '[' after the marker parses exactly one JSON value, so text after the
    array (instructions, a current date) never breaks it.
    """
    at = system.find(TOOLS_MARKER)
    if at < 0:
        raise RecordError("tools_not_found", "system", f"marker {TOOLS_MARKER!r} not found")
    start = system.find("[", at + len(TOOLS_MARKER))
    if start < 0:
        raise RecordError("tools_not_found", "system", "no '[' after the tool-list marker")
    try:
        tools, end = raw_decode_record(system, start, "system.tools", max_depth=None)
    except RecordValueError as e:
        raise field_error(e, "tools_json_error") from None
    rest = system[:at] + system[end:]
    for line in _BOILERPLATE:
        rest = rest.replace(line, "")
    rest = "\n".join(x.strip() for x in rest.splitlines() if x.strip().strip(".") != "")
    return tools, rest.strip()


def _looks_like_call(text: str) -> bool:
    t = text.strip()
    return t.startswith("[") and t.endswith("]") and "(" in t


def _embedded_call(text: str, tools: list) -> bool:
    """Whether a text turn holds `[<candidate tool>(` somewhere (a call with prose around it)."""
    return "[" in text and any(f"[{t.name}(" in text for t in tools)


def convert(raw: Any, pos: Position, no_call_samples: bool = False) -> list[Sample | Rejection]:
    """One dialogue -> one sample per assistant tool-call step (and per text turn if `no_call_samples`)."""
    if not isinstance(raw, Mapping):
        raise RecordError("bad_record_type", "<record>", f"expected an object, got {type(raw).__name__}")
    system = require_str(raw, "system")
    tool_dicts, system_rest = extract_tools(system)
    tools = tools_from_list(tool_dicts, "system.tools")
    conv = raw.get("conversations")
    if not isinstance(conv, list) or not conv:
        raise RecordError(
            "missing_field" if conv is None else "bad_field_type",
            "conversations",
            "expected a non-empty list of turns",
        )
    rid = record_id(raw, pos)
    history: list[dict[str, Any]] = [{"role": "system", "content": system_rest}] if system_rest else []
    out: list[Sample | Rejection] = []
    step = 0
    for i, turn in enumerate(conv):
        where = f"conversations[{i}]"
        if not isinstance(turn, Mapping):
            raise RecordError("bad_field_type", where, "expected an object with 'from' and 'value'")
        role = _ROLES.get(str(turn.get("from", "")).lower())
        value = turn.get("value")
        if role is None:
            raise RecordError("bad_role", f"{where}.from", f"unknown speaker {turn.get('from')!r:.40}")
        if not isinstance(value, str):
            raise RecordError("bad_field_type", f"{where}.value", "expected a string")
        if role != "assistant":
            history.append(_tool_message(value) if role == "tool" else {"role": "user", "content": value})
            continue
        if not any(m["role"] == "user" for m in history):
            raise RecordError("formatting_inconsistent", where, "assistant turn before any user turn")
        sid = f"{NAME}:{rid}:{step}"
        if _looks_like_call(value):
            calls = parse_python_calls(value)
            if not calls:
                # later steps would carry an undecodable call in their history: stop the dialogue here
                out.append(
                    Rejection(
                        "call_parse_error",
                        f"{where}.value",
                        f"assistant call is not a decodable Python call list: {value[:200]!r}",
                        sid,
                    )
                )
                return out
            if history[-1]["role"] not in ("user", "tool"):
                out.append(
                    Rejection(
                        "formatting_inconsistent", where, "call step does not follow a user or tool turn", sid
                    )
                )
            else:
                out.append(_sample(rid, step, i, history, tools, calls))
            history.append({"role": "assistant", "content": "", "tool_calls": [c.to_dict() for c in calls]})
        elif _embedded_call(value, tools):
            # prose wrapped around a call list: neither a clean call step nor a clean text turn
            out.append(
                Rejection(
                    "formatting_inconsistent",
                    f"{where}.value",
                    f"text mixed with a tool call: {value[:200]!r}",
                    sid,
                )
            )
            return out
        else:
            if no_call_samples and history[-1]["role"] in ("user", "tool"):
                out.append(
                    _sample(rid, step, i, history, tools, [], no_call="text_turn", reference_text=value)
                )
            history.append({"role": "assistant", "content": value})
        step += 1
    return out


def _tool_message(value: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "tool", "content": value}
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return msg  # plain-text (or hostile) results are still valid history: the text is kept as is
    if isinstance(parsed, list) and len(parsed) == 1 and isinstance(parsed[0], Mapping):
        parsed = parsed[0]
    if isinstance(parsed, Mapping) and isinstance(parsed.get("name"), str):
        msg["name"] = parsed["name"]
    return msg


def _sample(
    rid: Any, step: int, turn: int, history: list[dict[str, Any]], tools: list, answer: list, **meta: Any
) -> Sample:
    meta = {"raw_id": rid, "step": step, "turn": turn, **meta}
    return make_sample(NAME, f"{rid}:{step}", [dict(m) for m in history], tools, answer, meta)
