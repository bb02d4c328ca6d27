"""The canonical format itself: one `Sample.to_dict()` per line (or a JSON array / parquet of them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tooltune.data.sources.base import Position, RawRecord, RecordError, Rejection
from tooltune.data.sources.reading import iter_input
from tooltune.schema import Sample, SchemaError

NAME = "jsonl"
REQUIRED_FIELDS = ("id", "category", "messages", "tools", "answer")


def read(spec: str, split: str = "train", lenient: bool = False) -> Iterator[RawRecord]:
    return iter_input(spec, REQUIRED_FIELDS, split=split, lenient=lenient)


def is_multi_turn(raw: Any) -> bool:
    msgs = raw.get("messages") if isinstance(raw, dict) else None
    return (
        isinstance(msgs, list) and sum(1 for m in msgs if isinstance(m, dict) and m.get("role") == "user") > 1
    )


def convert(raw: Any, pos: Position) -> list[Sample | Rejection]:
    try:
        sample = Sample.from_dict(raw, where="record")
    except SchemaError as e:
        field = str(e).split(":", 1)[0]
        raise RecordError("schema_error", field, str(e)) from None
    if not sample.source:
        sample.source = NAME
    return [sample]
