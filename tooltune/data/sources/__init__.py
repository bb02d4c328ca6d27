"""Source adapters: one module per public format, each a small function from a raw record to Samples.

Every adapter module exposes `NAME`, `REQUIRED_FIELDS`, `read(spec, split, lenient) ->
Iterator[RawRecord]` (`lenient`: yield records that cannot be decoded with `error` set instead of
raising `DataFileError`), `convert(raw, position) -> list[Sample | Rejection]` (raising `RecordError`
for a bad record) and `is_multi_turn(raw) -> bool` (for the statistics table).

`SOURCES` is the registry of adapters by name (a `tooltune.config.Registry` of modules): the adapter
modules are imported on the first lookup, and an unknown name is an `UnknownName` naming the closest
sources. A new adapter is a module here plus its name in `ADAPTER_MODULES`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tooltune.config import Registry
from tooltune.data.sources.base import DataFileError, RawRecord, RecordError, Rejection, SourceUnavailable

ADAPTER_MODULES = ("xlam", "toolace", "toolrl", "bfcl", "apibank", "acebench", "jsonl")
"""The adapter modules of this package, in the order the sources are listed."""


def _import_adapters() -> None:
    for module in ADAPTER_MODULES:
        SOURCES.add(module, importlib.import_module(f"tooltune.data.sources.{module}"))


SOURCES: Registry[ModuleType] = Registry("source", key="sources", loader=_import_adapters)

__all__ = [
    "SOURCES",
    "DataFileError",
    "RawRecord",
    "RecordError",
    "Rejection",
    "SourceUnavailable",
    "get_source",
]


def get_source(name: str, key: str = "") -> ModuleType:
    """The adapter module for `name` (one of SOURCES); `UnknownName` naming `key` (default
    ``sources``) when there is none."""
    return SOURCES.get(name, key=key)
