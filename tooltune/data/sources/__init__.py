"""Source adapters: one module per public format, each a small function from a raw record to Samples.

Every adapter module exposes `NAME`, `REQUIRED_FIELDS`, `read(spec, split, lenient) ->
Iterator[RawRecord]` (`lenient`: yield records that cannot be decoded with `error` set instead of
raising `DataFileError`), `convert(raw, position) -> list[Sample | Rejection]` (raising `RecordError`
for a bad record) and `is_multi_turn(raw) -> bool` (for the statistics table).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tooltune.data.sources.base import DataFileError, RawRecord, RecordError, Rejection, SourceUnavailable

SOURCES = ("xlam", "toolace", "toolrl", "bfcl", "apibank", "acebench", "jsonl")

__all__ = [
    "SOURCES",
    "DataFileError",
    "RawRecord",
    "RecordError",
    "Rejection",
    "SourceUnavailable",
    "get_source",
]


def get_source(name: str) -> ModuleType:
    """The adapter module for `name` (one of SOURCES)."""
    if name not in SOURCES:
        raise ValueError(f"unknown source {name!r}; choose one of {', '.join(SOURCES)}")
    return importlib.import_module(f"tooltune.data.sources.{name}")
