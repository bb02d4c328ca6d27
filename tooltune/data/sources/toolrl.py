"""ToolRL (qiancheng0/ToolRL, Qian et al. 2025): its SFT file `rlla_sft.json` and its verl test parquet.

Raw record: {"instruction": system text listing the tools ("**Available Tools**" then `N. Name: …`,
`Description: …`, `Parameters: {xLAM-style JSON}` per tool, then "**Steps for Each Turn**" and ToolRL's
own output instructions), "input": "**Dialogue Records History**" then blocks `<user>…</user>`,
`<think>…</think>`, `<tool_call>` (one JSON call per line), `<obs>…</obs>` (tool results) and
`<response>…</response>`, "output": the target in ToolRL's format (`<think>` then `<tool_call>` and/or
`<response>`)}. A verl row of `rlla_test.parquet` holds the same three fields in `extra_info`.

One record is one sample: the dialogue before the target is the history (earlier `<think>` blocks as
the assistant turns' `reasoning`), the target's calls are the answer (read by the `toolrl` grammar's
decoder) and its `<think>` text is `meta["reasoning"]`, unless that text spells one of the format's
tags, as 17 released targets do ("…within the <tool_call> tags…"): as a training target it would teach
a completion the format check refuses, so the template's default reasoning is used. A target without
calls (a `<response>` alone: a question back, a refusal) is a no-call sample only with
`no_call_samples`, as ToolACE's text turns are. ToolRL's own instructions are not kept: tooltune's
templates give their own.

`read("package")` reads the copy of `rlla_sft.json` shipped with tooltune (Apache-2.0, its LICENSE and
origin beside it in `tooltune/data/toolrl/`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tooltune.data.sources.base import (
    DataFileError,
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
from tooltune.data.sources.reading import iter_file
from tooltune.parsing.blocks import RESPONSE, THINK, TOOL_CALL
from tooltune.parsing.json_calls import decode_json_lines
from tooltune.schema import RecordValueError, Sample, ToolCall, raw_decode_record

NAME = "toolrl"
REQUIRED_FIELDS = ("instruction", "input", "output")
VERL_FIELD = "extra_info"
"""The column of a verl row (ToolRL's parquet files) that holds the three fields."""
PACKAGE_DATA = Path(__file__).resolve().parents[1] / "toolrl" / "rlla_sft.json"
"""The copy of ToolRL's `dataset/rlla_4k_raw/rlla_sft.json` shipped with tooltune."""

TOOLS_START, TOOLS_END = "**Available Tools**", "**Steps for Each Turn**"
HISTORY_MARKER = "**Dialogue Records History**"
USER, OBS = ("<user>", "</user>"), ("<obs>", "</obs>")
MAX_TEXT_CHARS = 200_000
"""Longest instruction, input or output read (the released file's longest is under 7,000)."""
_TOOL_HEAD = re.compile(r"(?m)^\d+\. Name: ?(.*)$")
_BLOCKS = {open_: (close, kind) for kind, (open_, close) in
           {"user": USER, "obs": OBS, "think": THINK, "tool_call": TOOL_CALL, "response": RESPONSE}.items()}
_BLOCK_OPEN = re.compile("|".join(re.escape(t) for t in _BLOCKS))
_TAGS = (*THINK, *TOOL_CALL, *RESPONSE)


def read(spec: str | None, split: str = "train", lenient: bool = False) -> Iterator[RawRecord]:
    """Records of `spec`: "package" (or None) for the shipped copy, a JSON/JSONL file of the SFT layout,
    a verl parquet (its `extra_info` rows), or a folder of such files."""
    path = str(PACKAGE_DATA) if spec in (None, "", "package", NAME) else spec
    if os.path.isdir(path):
        files = [os.path.join(path, n) for n in sorted(os.listdir(path))
                 if n.endswith((".json", ".jsonl", ".parquet"))]
    elif os.path.isfile(path):
        files = [path]
    else:
        raise DataFileError(f"{path}: no such ToolRL data file or folder")
    for file in files:
        verl = file.endswith(".parquet")
        for rec in iter_file(file, (VERL_FIELD,) if verl else REQUIRED_FIELDS, lenient):
            if verl and isinstance(rec.data, Mapping) and isinstance(rec.data.get(VERL_FIELD), Mapping):
                rec.data = dict(rec.data[VERL_FIELD])
            yield rec


def is_multi_turn(raw: Any) -> bool:
    text = raw.get("input") if isinstance(raw, Mapping) else None
    return isinstance(text, str) and text.count(USER[0]) > 1


def _text(raw: Mapping, key: str) -> str:
    value = require_str(raw, key)
    if len(value) > MAX_TEXT_CHARS:
        raise RecordError("too_long", key, f"{len(value)} characters, more than {MAX_TEXT_CHARS}")
    return value


def parse_tools(instruction: str) -> list[dict[str, Any]]:
    """The tools listed between "**Available Tools**" and "**Steps for Each Turn**", as xLAM-style dicts
    ({"name", "description", "parameters": {param: {"type", "description", "default"}}})."""
    start = instruction.find(TOOLS_START)
    if start < 0:
        raise RecordError("tools_not_found", "instruction", f"{TOOLS_START!r} not found")
    end = instruction.find(TOOLS_END, start)
    section = instruction[start : end if end >= 0 else len(instruction)]
    heads = list(_TOOL_HEAD.finditer(section))
    tools = []
    for i, head in enumerate(heads):
        where = f"instruction.tools[{i}]"
        chunk = section[head.end() : heads[i + 1].start() if i + 1 < len(heads) else len(section)]
        desc_at, params_at = chunk.find("Description:"), chunk.find("Parameters:")
        brace = chunk.find("{", params_at) if params_at >= 0 else -1
        if brace < 0:
            raise RecordError("tools_not_found", where, "no 'Parameters: {…}' object")
        has_description = 0 <= desc_at < params_at
        description = chunk[desc_at + len("Description:") : params_at].strip() if has_description else ""
        try:
            params, _ = raw_decode_record(chunk, brace, f"{where}.parameters", max_depth=None)
        except RecordValueError as e:
            raise field_error(e, "tools_json_error") from None
        tools.append({"name": head.group(1).strip(), "description": description, "parameters": params})
    if not tools:
        raise RecordError("tools_not_found", "instruction", f"no 'N. Name:' entry after {TOOLS_START!r}")
    return tools


def blocks(text: str, field_name: str) -> list[tuple[str, str]]:
    """(kind, inner text) of each tagged block of `text` in order (user, obs, think, tool_call, response);
    anything but whitespace between blocks, or a block left open, is a RecordError."""
    out: list[tuple[str, str]] = []
    pos = 0
    while True:
        m = _BLOCK_OPEN.search(text, pos)
        gap = text[pos : m.start() if m else len(text)]
        if gap.strip():
            raise RecordError("formatting_inconsistent", field_name,
                              f"text outside the tagged blocks: {gap.strip()[:80]!r}")
        if m is None:
            return out
        close, kind = _BLOCKS[m.group(0)]
        end = text.find(close, m.end())
        if end < 0:
            raise RecordError("formatting_inconsistent", field_name, f"{m.group(0)} is never closed")
        out.append((kind, text[m.end() : end].strip()))
        pos = end + len(close)


def history_messages(dialogue: str) -> list[dict[str, Any]]:
    """The chat messages of ToolRL's dialogue record (the text after "**Dialogue Records History**")."""
    messages: list[dict[str, Any]] = []
    reasoning: str | None = None
    for i, (kind, inner) in enumerate(blocks(dialogue, "input")):
        where = f"input.block[{i}]"
        if kind == "user":
            messages.append({"role": "user", "content": inner})
        elif kind == "think":
            reasoning = inner
        elif kind == "tool_call":
            calls, error = decode_json_lines(inner)
            if calls is None:
                raise RecordError("call_parse_error", where, f"earlier tool call not decodable: {error}")
            messages.append({"role": "assistant", "content": "", "tool_calls": [c.to_dict() for c in calls],
                             **({"reasoning": reasoning} if reasoning else {})})
            reasoning = None
        elif kind == "obs":
            messages.append({"role": "tool", "content": inner})
        else:
            messages.append({"role": "assistant", "content": inner,
                             **({"reasoning": reasoning} if reasoning else {})})
            reasoning = None
    return messages


def convert(raw: Any, pos: Position, no_call_samples: bool = False) -> list[Sample | Rejection]:
    """One ToolRL record -> one sample (none for a target without calls unless `no_call_samples`)."""
    if not isinstance(raw, Mapping):
        raise RecordError("bad_record_type", "<record>", f"expected an object, got {type(raw).__name__}")
    tools = tools_from_list(parse_tools(_text(raw, "instruction")), "instruction.tools")
    dialogue = _text(raw, "input")
    at = dialogue.find(HISTORY_MARKER)
    if at < 0:
        raise RecordError("formatting_inconsistent", "input", f"{HISTORY_MARKER!r} not found")
    messages = history_messages(dialogue[at + len(HISTORY_MARKER) :])
    if not messages or messages[-1]["role"] not in ("user", "tool"):
        raise RecordError("formatting_inconsistent", "input", "the dialogue ends with no user or tool turn")
    reasoning, calls, response = read_target(_text(raw, "output"))
    rid = record_id(raw, pos)
    meta: dict[str, Any] = {"raw_id": rid}
    if reasoning and not any(tag in reasoning for tag in _TAGS):
        meta["reasoning"] = reasoning
    elif reasoning:  # as a training target it would break the format it teaches (one tag of each kind)
        meta["reasoning_dropped"] = "the reasoning spells a format tag"
    if not calls:
        if not no_call_samples:
            return []
        meta.update(no_call="response", reference_text=response or "")
    return [make_sample(NAME, rid, messages, tools, calls, meta)]


def read_target(output: str) -> tuple[str | None, list[ToolCall], str | None]:
    """(reasoning, calls, response text) of a target: a `<think>` block, then a `<tool_call>` block (one
    JSON call per line, `toolrl`'s decoder) and/or a `<response>` block, each at most once."""
    found: dict[str, str] = {}
    for kind, inner in blocks(output, "output"):
        if kind in ("user", "obs") or kind in found:
            raise RecordError("formatting_inconsistent", "output", f"unexpected or repeated <{kind}> block")
        found[kind] = inner
    if "tool_call" not in found and "response" not in found:
        raise RecordError("formatting_inconsistent", "output", "neither <tool_call> nor <response>")
    calls: list[ToolCall] = []
    if "tool_call" in found:
        decoded, error = decode_json_lines(found["tool_call"])
        if decoded is None:
            raise RecordError("answer_json_error", "output", f"target calls not decodable: {error}")
        calls = decoded
    return found.get("think"), calls, found.get("response")
