"""Shared plumbing for source adapters: record errors, positions, file and hub readers.

An adapter turns one raw record into `Sample`s (or `Rejection`s for steps it cannot use). Two kinds
of failure are kept apart, as the pipeline must account for every record:

- a malformed *record* raises `RecordError` (bad JSON inside a field, a call that does not parse, a
  missing field in one row) or anything else a hostile record provokes; the pipeline counts it as
  rejected with a reason (`as_record_error`) and goes on. A line the reader cannot decode (invalid
  UTF-8, not JSON, nesting too deep for the JSON decoder, an integer over Python's digit limit) is
  such a record too: with `lenient=True` the reader yields it with `error` set. Nesting deeper than
  `MAX_RECORD_DEPTH` is refused on the samples built from a record (the pipeline checks each one
  before writing it), not here;
- a malformed *file* (not JSON at all: binary, compressed, or records that lack the format's fields
  from the first row) raises `DataFileError`, naming the file, the line and the field, and stops the
  run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooltune.data.sources.types import tool_spec_from_source
from tooltune.schema import (
    RecordValueError,
    Sample,
    SchemaError,
    ToolCall,
    ToolSpec,
    calls_from_any,
    loads_record,
)

logger = logging.getLogger(__name__)

Position = dict[str, Any]
"""Where a raw record came from: {"file": path, "line": n} (JSONL, 1-based) or {"file", "index"}."""

UNREADABLE_TEXT_CHARS = 2000
"""How much of an unreadable record's text a RawRecord keeps (for rejected.jsonl)."""


class RecordError(Exception):
    """One raw record cannot be converted; `reason` is a short stable key used in statistics."""

    def __init__(self, reason: str, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.reason = reason
        self.field = field
        self.message = message


class DataFileError(SchemaError):
    """A whole input file is unusable (not JSON, wrong format); names file, line and field."""


class SourceUnavailable(RuntimeError):
    """A hub dataset id was given but the hub cannot be reached (offline machine)."""


@dataclass
class Rejection:
    """A step of a record that an adapter or a pipeline filter refused, with its reason."""

    reason: str
    field: str
    detail: str
    sample_id: str = ""
    sample: dict[str, Any] | None = None


@dataclass
class RawRecord:
    """One raw record and where it came from.

    A record the reader could not decode has `data` None, `error` saying why (the rejection) and
    `text`, the start of its text (invalid UTF-8 shown as backslash escapes).
    """

    position: Position
    data: Any
    meta: dict[str, Any] = field(default_factory=dict)
    error: RecordError | None = None
    text: str | None = None


def describe(pos: Position) -> str:
    where = pos.get("file", "<input>")
    if "line" in pos:
        return f"{where}:{pos['line']}"
    if "index" in pos:
        return f"{where}[{pos['index']}]"
    return str(where)


def field_error(e: RecordValueError, syntax_reason: str = "json_error") -> RecordError:
    """The RecordError for JSON text in a field that `loads_record` refused (`e.where` names the field):
    a syntax error counts under `syntax_reason` (the source's own key), other causes under their own."""
    return RecordError(syntax_reason if e.reason == "json_error" else e.reason, e.where, e.message)


def as_record_error(e: BaseException) -> RecordError:
    """The RecordError that rejects a record whose conversion raised `e`.

    A hostile record can make any step raise: RecursionError on nesting the reader let through,
    ValueError on an integer over Python's digit limit, SchemaError or TypeError on a value of an
    unexpected shape. Anything not anticipated counts as `conversion_error`, with its type and text.
    """
    if isinstance(e, RecordError):
        return e
    if isinstance(e, RecordValueError):
        return RecordError(e.reason, e.where, e.message)
    if isinstance(e, RecursionError):
        return RecordError("too_deep", "<record>", "nesting too deep to convert")
    if isinstance(e, ValueError) and "integer string conversion" in str(e):
        return RecordError("huge_integer", "<record>", "an integer longer than Python's digit limit")
    if isinstance(e, SchemaError):
        field_name, _, message = str(e).partition(": ")
        return RecordError("schema_error", field_name, message or str(e))
    return RecordError("conversion_error", "<record>", f"{type(e).__name__}: {str(e)[:500]}")


# ------------------------------------------------------------------------------------------------
# helpers shared by adapters


def require_str(raw: Mapping, key: str) -> str:
    value = raw.get(key)
    if value is None:
        raise RecordError("missing_field", key, "field missing")
    if not isinstance(value, str):
        raise RecordError("bad_field_type", key, f"expected a string, got {type(value).__name__}")
    return value


def load_json_field(raw: Mapping, key: str, reason: str) -> Any:
    """A field that holds JSON either as a string (xLAM on the hub) or already decoded (parquet).

    JSON text that does not parse counts under `reason`; text that `loads_record` refuses for another
    cause (too deep, non-finite numbers, huge integers) under that cause."""
    value = raw.get(key)
    if value is None:
        raise RecordError("missing_field", key, "field missing")
    if isinstance(value, str):
        try:
            return loads_record(value, key, max_depth=None)
        except RecordValueError as e:
            raise field_error(e, reason) from None
    return value


_SPEC_CACHE: dict[str, ToolSpec] = {}
_SPEC_CACHE_MAX = 100_000


def _spec(t: Any, where: str) -> ToolSpec:
    """`tool_spec_from_source`, memoized on the tool's repr (types distinct: 1, 1.0 and True differ).

    Public sets repeat the same few thousand tools across tens of thousands of records, and schema
    normalization costs about ten times the key. Specs are shared, so nobody may mutate one. A new
    spec must also pass `ToolSpec.from_dict`, the check it meets when prepared data is read back.
    """
    key = repr(t)
    spec = _SPEC_CACHE.get(key)
    if spec is None:
        spec = tool_spec_from_source(t, where)
        ToolSpec.from_dict(spec.to_dict(), where)
        if len(_SPEC_CACHE) >= _SPEC_CACHE_MAX:
            _SPEC_CACHE.clear()
        _SPEC_CACHE[key] = spec
    return spec


def tools_from_list(items: Any, field_name: str) -> list[ToolSpec]:
    """ToolSpecs from a list of tool dicts; identical duplicates are merged, conflicting ones refused."""
    if not isinstance(items, list):
        raise RecordError(
            "bad_field_type", field_name, f"expected a list of tools, got {type(items).__name__}"
        )
    out: dict[str, ToolSpec] = {}
    for i, t in enumerate(items):
        try:
            spec = _spec(t, f"{field_name}[{i}]")
        except SchemaError as e:
            raise RecordError("tool_schema_error", f"{field_name}[{i}]", str(e)) from None
        if spec.name in out and out[spec.name] != spec:
            raise RecordError(
                "formatting_inconsistent", f"{field_name}[{i}]", f"two different tools named {spec.name!r}"
            )
        out[spec.name] = spec
    return list(out.values())


def calls_or_error(value: Any, field_name: str) -> list[ToolCall]:
    try:
        return calls_from_any(value, field_name)
    except RecordValueError as e:
        raise field_error(e, "answer_json_error") from None
    except SchemaError as e:
        reason = "answer_json_error" if isinstance(value, str) else "answer_schema_error"
        raise RecordError(reason, field_name, str(e)) from None


def record_id(raw: Mapping[str, Any], pos: Position) -> Any:
    """The record's own id, else its position (`<file name>:<line or index>`), so ids stay unique when
    several files of one source are prepared together."""
    if raw.get("id") is not None:
        return raw["id"]
    n = pos.get("line", pos.get("index"))
    return f"{os.path.basename(str(pos['file']))}:{n}" if pos.get("file") else n


def make_sample(
    source: str,
    sid: str,
    messages: list[dict[str, Any]],
    tools: list[ToolSpec],
    answer: list[ToolCall],
    meta: dict[str, Any],
    category: str | None = None,
) -> Sample:
    """A Sample with id `<source>:<sid>` and, unless given, the category inferred from its shape."""
    return Sample(
        id=f"{source}:{sid}",
        source=source,
        category=category or infer_category(messages, tools, answer),
        messages=messages,
        tools=tools,
        answer=answer,
        meta=meta,
    )


def infer_category(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec], answer: Sequence[ToolCall]
) -> str:
    """BFCL-style category from the shape of a sample.

    multi_step: earlier calls or tool results in the history; irrelevance: no call expected;
    one call: simple with one candidate tool, else multiple; several calls: parallel when they all
    use one function, else parallel_multiple.
    """
    if any(m.get("role") == "tool" or m.get("tool_calls") for m in messages):
        return "multi_step"
    if not answer:
        return "irrelevance"
    if len(answer) == 1:
        return "simple" if len(tools) == 1 else "multiple"
    return "parallel" if len({c.name for c in answer}) == 1 else "parallel_multiple"
