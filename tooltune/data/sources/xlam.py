"""xLAM (Salesforce/xlam-function-calling-60k): single-turn queries with JSON-string answers and tools.

Raw record: {"id", "query", "answers": '[{"name", "arguments"}]', "tools": '[{"name", "description",
"parameters": {p: {"type": "str, optional", "description", "default"}}}]'}; `answers` and `tools` are
JSON *strings* on the hub (already decoded lists are accepted too, as parquet dumps sometimes hold).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tooltune.data.sources.base import (
    Position,
    RawRecord,
    RecordError,
    Rejection,
    calls_or_error,
    load_json_field,
    make_sample,
    record_id,
    require_str,
    tools_from_list,
)
from tooltune.data.sources.reading import iter_input
from tooltune.schema import Sample

NAME = "xlam"
HUB_ID = "Salesforce/xlam-function-calling-60k"
REQUIRED_FIELDS = ("query", "answers", "tools")


def read(spec: str, split: str = "train", lenient: bool = False) -> Iterator[RawRecord]:
    return iter_input(spec, REQUIRED_FIELDS, split=split, lenient=lenient)


def is_multi_turn(raw: Any) -> bool:
    return False


def convert(raw: Any, pos: Position) -> list[Sample | Rejection]:
    """One xLAM record -> one Sample (the query as the only user turn)."""
    if not isinstance(raw, Mapping):
        raise RecordError("bad_record_type", "<record>", f"expected an object, got {type(raw).__name__}")
    query = require_str(raw, "query")
    if not query.strip():
        raise RecordError("empty_query", "query", "empty query")
    tools = tools_from_list(load_json_field(raw, "tools", "tools_json_error"), "tools")
    answer = calls_or_error(load_json_field(raw, "answers", "answer_json_error"), "answers")
    rid = record_id(raw, pos)
    messages = [{"role": "user", "content": query}]
    return [make_sample(NAME, rid, messages, tools, answer, {"raw_id": rid})]
