"""Shared plumbing for source adapters: record errors, positions, file and hub readers.

An adapter turns one raw record into `Sample`s (or `Rejection`s for steps it cannot use). Two kinds
of failure are kept apart, as the pipeline must account for every record:

- a malformed *record* (bad JSON inside a field, a call that does not parse, a missing field in one
  row) raises `RecordError`; the pipeline counts it as rejected with the error's reason and goes on;
- a malformed *file* (not JSON at all, or records that lack the format's fields from the first row)
  raises `DataFileError`, naming the file, the line and the field, and stops the run.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooltune.data.sources.types import tool_spec_from_source
from tooltune.schema import Sample, SchemaError, ToolCall, ToolSpec, calls_from_any

logger = logging.getLogger(__name__)

Position = dict[str, Any]
"""Where a raw record came from: {"file": path, "line": n} (JSONL, 1-based) or {"file", "index"}."""


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
    position: Position
    data: Any
    meta: dict[str, Any] = field(default_factory=dict)


def describe(pos: Position) -> str:
    where = pos.get("file", "<input>")
    if "line" in pos:
        return f"{where}:{pos['line']}"
    if "index" in pos:
        return f"{where}[{pos['index']}]"
    return str(where)


# ------------------------------------------------------------------------------------------------
# readers


def _sniff(path: str) -> str:
    if path.endswith(".parquet"):
        return "parquet"
    with open(path, encoding="utf-8") as f:
        while True:
            ch = f.read(1)
            if not ch:
                return "empty"
            if not ch.isspace():
                return "array" if ch == "[" else "jsonl"


def iter_file(path: str, required: Sequence[str] = ()) -> Iterator[RawRecord]:
    """Yield the records of a JSON array, JSONL or parquet file with their positions.

    `required` are the top-level fields of the format; if the *first* record lacks one, the file is
    of another format and a `DataFileError` names it. Later rows missing a field are left to the
    adapter (record-level rejection).
    """
    if not os.path.isfile(path):
        raise DataFileError(f"{path}: no such file")
    kind = _sniff(path)
    if kind == "empty":
        return
    if kind == "parquet":
        yield from _check_first(_iter_parquet(path), required)
    elif kind == "array":
        yield from _check_first(_iter_array(path), required)
    else:
        yield from _check_first(_iter_jsonl(path), required)


def _check_first(records: Iterator[RawRecord], required: Sequence[str]) -> Iterator[RawRecord]:
    first = True
    for rec in records:
        if first and required:
            if not isinstance(rec.data, Mapping):
                raise DataFileError(
                    f"{describe(rec.position)}: expected a JSON object per record, "
                    f"got {type(rec.data).__name__}"
                )
            missing = [k for k in required if k not in rec.data]
            if missing:
                raise DataFileError(
                    f"{describe(rec.position)}: field {missing[0]!r} missing; this file "
                    f"does not look like the expected format (fields: {', '.join(required)})"
                )
        first = False
        yield rec


def _iter_jsonl(path: str) -> Iterator[RawRecord]:
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFileError(
                    f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})"
                ) from None
            yield RawRecord({"file": path, "line": lineno}, data)


def _iter_array(path: str) -> Iterator[RawRecord]:
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise DataFileError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(data, list):
        raise DataFileError(f"{path}:1: expected a JSON array of records, got {type(data).__name__}")
    for i, item in enumerate(data):
        yield RawRecord({"file": path, "index": i}, item)


def _iter_parquet(path: str) -> Iterator[RawRecord]:
    import pyarrow.parquet as pq  # deferred: only parquet needs pyarrow

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several unrelated types for a bad file
        raise DataFileError(f"{path}:1: not a readable parquet file ({e})") from None
    i = 0
    for batch in pf.iter_batches(batch_size=4096):
        for row in batch.to_pylist():
            yield RawRecord({"file": path, "index": i}, row)
            i += 1


def iter_hub(dataset_id: str, split: str = "train", required: Sequence[str] = ()) -> Iterator[RawRecord]:
    """Records of a Hugging Face hub dataset via `datasets.load_dataset` (needs network or HF cache).

    On an offline machine `load_dataset` fails; the error says to download the files elsewhere and
    pass the local JSON/JSONL/parquet path with --input instead.
    """
    try:
        import datasets  # deferred: datasets takes about a second to import
    except ImportError as e:  # pragma: no cover - datasets is a core dependency
        raise SourceUnavailable("the 'datasets' package is needed for hub datasets") from e
    try:
        ds = datasets.load_dataset(dataset_id, split=split)
    except Exception as e:  # network, auth and missing-dataset errors all land here
        raise SourceUnavailable(
            f"could not load hub dataset {dataset_id!r} (split {split!r}): {type(e).__name__}: {e}. "
            "This machine may be offline: download the dataset's files where the hub is reachable and "
            "pass the local JSON/JSONL/parquet file with --input instead."
        ) from None
    where = f"hf:{dataset_id}:{split}"
    yield from _check_first(
        (RawRecord({"file": where, "index": i}, row) for i, row in enumerate(ds)), required
    )


def iter_input(spec: str, required: Sequence[str] = (), split: str = "train") -> Iterator[RawRecord]:
    """`spec` is a local path or `hf:<dataset id>`; a directory yields all its JSON/JSONL/parquet files."""
    if spec.startswith("hf:"):
        yield from iter_hub(spec[3:], split=split, required=required)
        return
    if os.path.isdir(spec):
        for name in sorted(os.listdir(spec)):
            if name.endswith((".json", ".jsonl", ".parquet")):
                yield from iter_file(os.path.join(spec, name), required)
        return
    yield from iter_file(spec, required)


def answers_beside(path: str) -> dict[str, Any]:
    """{id: ground_truth} from `possible_answer/<same file name>` next to a BFCL or ACEBench data file."""
    pa = os.path.join(os.path.dirname(path), "possible_answer", os.path.basename(path))
    out: dict[str, Any] = {}
    if os.path.isfile(pa):
        for rec in iter_file(pa, ("id", "ground_truth")):
            if isinstance(rec.data, Mapping):
                out[str(rec.data.get("id"))] = rec.data.get("ground_truth")
    return out


def iter_with_answers(path: str, category: str, required: Sequence[str]) -> Iterator[RawRecord]:
    """Entries of a benchmark data file, each paired with its category and `possible_answer` entry."""
    answers = answers_beside(path)
    for rec in iter_file(path, required):
        rid = str(rec.data.get("id")) if isinstance(rec.data, Mapping) else None
        rec.data = {
            "entry": rec.data,
            "category": category,
            "ground_truth": answers.get(rid),
            "has_answer": rid in answers,
        }
        yield rec


def unpack_entry(raw: Mapping[str, Any]) -> tuple[Mapping[str, Any], str, Any, str]:
    """(entry, category, ground truth, id) of a record from `iter_with_answers`."""
    entry = raw["entry"]
    if not isinstance(entry, Mapping):
        raise RecordError("bad_record_type", "<record>", f"expected an object, got {type(entry).__name__}")
    return entry, raw["category"], raw["ground_truth"], str(entry.get("id"))


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
    """A field that holds JSON either as a string (xLAM on the hub) or already decoded (parquet)."""
    value = raw.get(key)
    if value is None:
        raise RecordError("missing_field", key, "field missing")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as e:
            raise RecordError(reason, key, f"not valid JSON ({e.msg} at column {e.colno})") from None
    return value


_SPEC_CACHE: dict[str, ToolSpec] = {}
_SPEC_CACHE_MAX = 100_000


def _spec(t: Any, where: str) -> ToolSpec:
    """`tool_spec_from_source`, memoized on the tool's repr (types distinct: 1, 1.0 and True differ).

    Public sets repeat the same few thousand tools across tens of thousands of records, and schema
    normalization costs about ten times the key. Specs are shared, so nobody may mutate one.
    """
    key = repr(t)
    spec = _SPEC_CACHE.get(key)
    if spec is None:
        spec = tool_spec_from_source(t, where)
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
