"""API-Bank (AlibabaResearch/DAMO-ConvAI `api-bank/`) level-1 and level-2 API-call samples.

Raw record: {"file", "id", "instruction": "...API descriptions:\\n{json}\\n{json}...", "input":
"User: ...\\nAI: ...\\nAPI-Request: [Api(k='v')]->result\\n...Generate API Request:\\n",
"expected_output": "API-Request: [ApiName(key='value', ...)]"}. Earlier API requests in the dialogue
become assistant tool calls followed by their results; tools that a `ToolSearcher` result describes
(level 2) join the candidate list, since that is how the model learns of them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from typing import Any

from tooltune.data.sources.base import (
    Position,
    RawRecord,
    RecordError,
    Rejection,
    field_error,
    make_sample,
    require_str,
    tools_from_list,
)
from tooltune.data.sources.reading import iter_input
from tooltune.parsing import parse_python_calls
from tooltune.schema import RecordValueError, Sample, raw_decode_record

NAME = "apibank"
REQUIRED_FIELDS = ("instruction", "input", "expected_output")
_DESC_MARKER = "API descriptions:"
_REQ = "API-Request:"
_SPEAKERS = {"User:": "user", "AI:": "assistant"}
_MAX_RESULT_CHARS = 100_000
# API-Bank writes list arguments inside quotes: attendees='['A', 'B']' (not Python); unquote them
_QUOTED_LIST = re.compile(r"""='(\[.*?\])'(?=\s*(?:,\s*\w+\s*=|\)))""")


def parse_request_calls(text: str) -> list | None:
    """Python-call list of an API request, repairing API-Bank's quoted list arguments if needed."""
    calls = parse_python_calls(text)
    if calls is None and "='[" in text:
        calls = parse_python_calls(_QUOTED_LIST.sub(r"=\1", text))
    return calls


def read(spec: str, split: str = "train", lenient: bool = False) -> Iterator[RawRecord]:
    return iter_input(spec, REQUIRED_FIELDS, split=split, lenient=lenient)


def is_multi_turn(raw: Any) -> bool:
    return isinstance(raw, Mapping) and str(raw.get("input", "")).count("User:") > 1


def parse_descriptions(instruction: str) -> list[Any]:
    """The JSON objects listed after 'API descriptions:' (one per line in the released files)."""
    at = instruction.find(_DESC_MARKER)
    if at < 0:
        raise RecordError("tools_not_found", "instruction", f"{_DESC_MARKER!r} not found")
    pos, out = at + len(_DESC_MARKER), []
    text = instruction
    while True:
        start = text.find("{", pos)
        if start < 0:
            return out
        try:
            where = f"instruction.api_descriptions[{len(out)}]"
            obj, pos = raw_decode_record(text, start, where, max_depth=None)
        except RecordValueError as e:
            raise field_error(e, "tools_json_error") from None
        out.append(obj)


def _split_request(line: str) -> tuple[list, str] | None:
    """'API-Request: [Api(a='x')]->result' -> (calls, result text); None if the call does not parse."""
    body = line[len(_REQ) :].strip()
    start = 0
    while True:
        cut = body.find("]->", start)
        if cut < 0:
            calls = parse_request_calls(body)
            return (calls, "") if calls else None
        calls = parse_request_calls(body[: cut + 1])
        if calls:
            return calls, body[cut + 3 :]
        start = cut + 1


def _searched_tool(result: str) -> list[dict[str, Any]]:
    """Tool descriptions a ToolSearcher result reveals (Python-literal dicts in the released files)."""
    if len(result) > _MAX_RESULT_CHARS:
        return []
    try:
        value = ast.literal_eval(result.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return []
    items = value if isinstance(value, list) else [value]
    return [
        x
        for x in items
        if isinstance(x, Mapping)
        and isinstance(x.get("name"), str)
        and isinstance(x.get("input_parameters"), Mapping)
    ]


def convert(raw: Any, pos: Position) -> list[Sample | Rejection]:
    if not isinstance(raw, Mapping):
        raise RecordError("bad_record_type", "<record>", f"expected an object, got {type(raw).__name__}")
    tool_dicts = parse_descriptions(require_str(raw, "instruction"))
    messages: list[dict[str, Any]] = []
    for n, line in enumerate(require_str(raw, "input").splitlines()):
        text = line.strip()
        if not text or text.startswith("Generate API Request"):
            continue
        if text.startswith(_REQ):
            parsed = _split_request(text)
            if parsed is None:
                raise RecordError(
                    "call_parse_error", f"input line {n + 1}", f"undecodable API request {text[:120]!r}"
                )
            calls, result = parsed
            messages.append({"role": "assistant", "content": "", "tool_calls": [c.to_dict() for c in calls]})
            messages.append({"role": "tool", "content": result.strip(), "name": calls[0].name})
            tool_dicts.extend(_searched_tool(result))
            continue
        for tag, role in _SPEAKERS.items():
            if text.startswith(tag):
                messages.append({"role": role, "content": text[len(tag) :].strip()})
                break
        else:  # a wrapped utterance continues the previous message
            if not messages:
                raise RecordError(
                    "formatting_inconsistent", "input", f"text before any speaker: {text[:80]!r}"
                )
            messages[-1]["content"] += "\n" + text
    if not any(m["role"] == "user" for m in messages):
        raise RecordError("empty_query", "input", "no user turn in the dialogue")
    expected = require_str(raw, "expected_output").strip()
    if not expected.startswith(_REQ):
        raise RecordError("answer_schema_error", "expected_output", f"expected '{_REQ} [...]'")
    answer = parse_request_calls(expected[len(_REQ) :])
    if not answer:
        raise RecordError(
            "call_parse_error", "expected_output", f"undecodable API request {expected[:120]!r}"
        )
    tools = tools_from_list(_unique(tool_dicts), "instruction.api_descriptions")
    # API-Bank dialogues end with the assistant announcing the call ("Let me check."); the sample must end
    # on a user or tool turn, so that announcement moves to meta
    preamble = (
        messages.pop()["content"]
        if messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls")
        else None
    )
    rid = f"{raw.get('file', '')}#{raw.get('id', pos.get('index'))}"
    return [
        make_sample(
            NAME,
            rid,
            messages,
            tools,
            answer,
            {
                "raw_id": raw.get("id"),
                "file": raw.get("file"),
                "expected_output": expected,
                "assistant_preamble": preamble,
            },
        )
    ]


def _unique(tools: list[Any]) -> list[Any]:
    """First description of each name: a ToolSearcher result may repeat a listed API with other wording."""
    seen: dict[Any, Any] = {}
    for t in tools:
        seen.setdefault(t.get("name") if isinstance(t, Mapping) else id(t), t)
    return list(seen.values())
