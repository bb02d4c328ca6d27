"""Reading source files: JSONL, JSON arrays (decoded element by element), parquet and hub datasets, each
record with its position (file, line / index) so a rejection names where it came from; a line that
cannot be read is one unreadable record, not the end of the run."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tooltune.data.sources.base import (
    UNREADABLE_TEXT_CHARS,
    DataFileError,
    Position,
    RawRecord,
    RecordError,
    SourceUnavailable,
    describe,
)
from tooltune.models.loading import hub_unreachable
from tooltune.schema import (
    RecordValueError,
    compressed_format,
    decode_line,
    loads_record,
    raw_decode_record,
)

logger = logging.getLogger(__name__)

_NOT_JSON = ("json_error", "invalid_utf8")
"""Decoding failures that, on a file's first record, mean the file is not JSON at all."""


def _sniff(path: str) -> str:
    if path.endswith(".parquet"):
        return "parquet"
    with open(path, "rb") as f:
        head = f.read(8)
        kind = compressed_format(head)
        if kind:
            raise DataFileError(
                f"{path}: a {kind}-compressed file; decompress it and pass the JSON, JSONL or parquet file"
            )
        if head.startswith(b"PAR1"):
            return "parquet"
        f.seek(0)
        while chunk := f.read(1 << 16):
            text = chunk.lstrip()
            if text:
                return "array" if text.startswith(b"[") else "jsonl"
    return "empty"


def iter_file(path: str, required: Sequence[str] = (), lenient: bool = False) -> Iterator[RawRecord]:
    """Yield the records of a JSON array, JSONL or parquet file with their positions.

    `required` are the top-level fields of the format; if the *first* record lacks one, the file is
    of another format and a `DataFileError` names it. Later rows missing a field are left to the
    adapter (record-level rejection). A record that cannot be decoded raises `DataFileError` naming
    its line and cause, or with `lenient` is yielded with `error` set for the caller to reject;
    either way, when no record of the file has decoded yet and the first one is not JSON text at all
    (binary, another format), the file is refused.
    """
    if not os.path.isfile(path):
        raise DataFileError(f"{path}: no such file")
    kind = _sniff(path)
    if kind == "empty":
        return
    if kind == "parquet":
        records = _iter_parquet(path)
    elif kind == "array":
        records = _iter_array(path)
    else:
        records = _iter_jsonl(path)
    yield from _check_first(records, required, lenient)


def _check_first(records: Iterator[RawRecord], required: Sequence[str], lenient: bool) -> Iterator[RawRecord]:
    first = True
    for rec in records:
        if rec.error is not None:
            if first and rec.error.reason in _NOT_JSON:
                raise DataFileError(
                    f"{describe(rec.position)}: {rec.error.message}; "
                    "this is not a JSON, JSONL or parquet file"
                )
            if not lenient:
                raise DataFileError(f"{describe(rec.position)}: {rec.error.message}")
            yield rec
            continue
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


def _unreadable(pos: Position, e: RecordValueError, text: str) -> RawRecord:
    return RawRecord(
        pos, None, error=RecordError(e.reason, "<record>", e.message), text=text[:UNREADABLE_TEXT_CHARS]
    )


def _unreadable_line(path: str, lineno: int, raw: bytes) -> RawRecord:
    """The record of a JSONL line that failed to decode, with the cause `loads_record` names."""
    pos = {"file": path, "line": lineno}
    text = raw[: UNREADABLE_TEXT_CHARS * 4].decode("utf-8", "backslashreplace")
    try:
        loads_record(decode_line(raw, describe(pos)), describe(pos), max_depth=None, finite=False)
    except RecordValueError as e:
        return _unreadable(pos, e, text)
    # decoding is deterministic: the second try fails as the first did, and this line is not reached
    return _unreadable(pos, RecordValueError("json_error", describe(pos), "not readable"), text)


def _iter_jsonl(path: str) -> Iterator[RawRecord]:
    # bytes in, one line decoded at a time: invalid UTF-8 costs one record, not the file
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
                if not line.strip():
                    continue
                data = json.loads(line)
            except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
                yield _unreadable_line(path, lineno, raw)
                continue
            yield RawRecord({"file": path, "line": lineno}, data)


_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
"""What `surrogateescape` makes of a byte that is not UTF-8 (text read strictly never holds these)."""
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _skip_value(text: str, start: int) -> int | None:
    """End of the JSON value at `start`, found by matching brackets outside strings (no recursion)."""
    if text[start] not in "[{":
        m = _NUMBER.match(text, start)
        return m.end() if m else None
    depth = 0
    for m in _STRUCTURE.finditer(text, start):
        tok = m.group()
        if tok in ("[", "{"):
            depth += 1
        elif tok in ("]", "}"):
            depth -= 1
            if depth == 0:
                return m.end()
    return None


def _iter_array(path: str) -> Iterator[RawRecord]:
    """Records of a JSON array, decoded one element at a time so that a hostile element is one record.

    A syntax error anywhere breaks the array as a whole (the next element cannot be located safely):
    `DataFileError`. Bytes that are not UTF-8 are decoded with `surrogateescape` and reported per
    element.
    """
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape")
    bad_bytes = _ESCAPED_BYTE.search(text) is not None
    ws = json.decoder.WHITESPACE

    def line_of(at: int) -> int:
        return text.count("\n", 0, at) + 1

    def broken(at: int, msg: str) -> DataFileError:
        return DataFileError(f"{path}:{line_of(at)}: not valid JSON ({msg})")

    def syntax_error(at: int) -> DataFileError:
        try:
            json.JSONDecoder().raw_decode(text, at)
        except json.JSONDecodeError as e:
            return DataFileError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})")
        return broken(at, "unreadable value")  # pragma: no cover - raw_decode_record refused it

    pos = ws.match(text, ws.match(text).end() + 1).end()  # after the opening bracket
    i = 0
    closed = text.startswith("]", pos)
    while not closed:
        start, where = pos, f"{path}[{i}]"
        rec = None
        try:
            data, pos = raw_decode_record(text, start, where, max_depth=None, finite=False)
        except RecordValueError as e:
            if e.reason == "json_error":
                raise syntax_error(start) from None
            end = _skip_value(text, start)
            if end is None:
                raise broken(start, "unterminated value") from None
            rec = _unreadable({"file": path, "index": i}, e, text[start:end])
            pos = end
        if rec is None:
            if bad_bytes and _ESCAPED_BYTE.search(text, start, pos):
                e = RecordValueError(
                    "invalid_utf8", where, f"not valid UTF-8 (record starting at line {line_of(start)})"
                )
                raw = text[start:pos].encode("utf-8", "surrogateescape")
                rec = _unreadable({"file": path, "index": i}, e, raw.decode("utf-8", "backslashreplace"))
            else:
                rec = RawRecord({"file": path, "index": i}, data)
        yield rec
        pos = ws.match(text, pos).end()
        if text.startswith(",", pos):
            pos = ws.match(text, pos + 1).end()
            i += 1
        elif text.startswith("]", pos):
            closed = True
        else:
            raise broken(pos, "expected ',' or ']' after a record")
    if ws.match(text, pos + 1).end() != len(text):
        raise broken(pos + 1, "extra data after the array")


def _iter_parquet(path: str) -> Iterator[RawRecord]:
    import pyarrow.parquet as pq  # deferred: only parquet needs pyarrow

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several unrelated types for a bad file
        raise DataFileError(f"{path}:1: not a readable parquet file ({e})") from None
    i = 0
    batches = pf.iter_batches(batch_size=4096)
    while True:
        try:
            batch = next(batches, None)
            rows = [] if batch is None else batch.to_pylist()
        except Exception as e:  # a corrupt row group: pyarrow raises several unrelated types
            raise DataFileError(f"{path}[{i}]: parquet rows not readable ({e})") from None
        if batch is None:
            return
        for row in rows:
            yield RawRecord({"file": path, "index": i}, row)
            i += 1


def iter_hub(dataset_id: str, split: str = "train", required: Sequence[str] = ()) -> Iterator[RawRecord]:
    """Records of a Hugging Face hub dataset via `datasets.load_dataset` (needs network or HF cache).

    On an offline machine `load_dataset` fails; the error says to download the files elsewhere and
    pass the local JSON/JSONL/parquet path with --input instead. When the hub does not answer
    (`models.loading.hub_unreachable`: a connection within seconds) and the offline switches are not
    set, that error comes at once, not after the hub client's retries; with HF_HUB_OFFLINE=1 the
    datasets library reads its local cache.
    """
    try:
        import datasets  # deferred: datasets takes about a second to import
    except ImportError as e:  # pragma: no cover - datasets is a core dependency
        raise SourceUnavailable("the 'datasets' package is needed for hub datasets") from e
    cache_only = any(os.environ.get(v, "").lower() in ("1", "true", "yes")
                     for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    unreachable = None if cache_only else hub_unreachable()
    if unreachable:
        raise SourceUnavailable(
            f"could not load hub dataset {dataset_id!r} (split {split!r}): the Hugging Face Hub cannot be "
            f"reached ({unreachable}). Download the dataset's files where the hub is reachable and pass the "
            "local JSON/JSONL/parquet file with --input instead (or, when the dataset is in the local "
            "Hugging Face cache, set HF_HUB_OFFLINE=1 to read it from there)."
        )
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
        (RawRecord({"file": where, "index": i}, row) for i, row in enumerate(ds)), required, lenient=False
    )


def iter_input(
    spec: str, required: Sequence[str] = (), split: str = "train", lenient: bool = False
) -> Iterator[RawRecord]:
    """`spec` is a local path or `hf:<dataset id>`; a directory yields all its JSON/JSONL/parquet files.

    `lenient`: yield undecodable records with `error` set instead of raising (see `iter_file`)."""
    if spec.startswith("hf:"):
        yield from iter_hub(spec[3:], split=split, required=required)
        return
    if os.path.isdir(spec):
        for name in sorted(os.listdir(spec)):
            if name.endswith((".json", ".jsonl", ".parquet")):
                yield from iter_file(os.path.join(spec, name), required, lenient)
        return
    yield from iter_file(spec, required, lenient)


def answers_beside(path: str, lenient: bool = False) -> dict[str, Any]:
    """{id: ground_truth} from `possible_answer/<same file name>` next to a BFCL or ACEBench data file.

    With `lenient`, an answer line that cannot be decoded is logged and skipped (its entry is then
    rejected for lack of a ground truth)."""
    pa = os.path.join(os.path.dirname(path), "possible_answer", os.path.basename(path))
    out: dict[str, Any] = {}
    if os.path.isfile(pa):
        for rec in iter_file(pa, ("id", "ground_truth"), lenient):
            if rec.error is not None:
                logger.warning("%s: answer skipped: %s", describe(rec.position), rec.error.message)
            elif isinstance(rec.data, Mapping):
                out[str(rec.data.get("id"))] = rec.data.get("ground_truth")
    return out


def iter_with_answers(
    path: str, category: str, required: Sequence[str], lenient: bool = False
) -> Iterator[RawRecord]:
    """Entries of a benchmark data file, each paired with its category and `possible_answer` entry.

    `lenient` as for `iter_file`; an undecodable entry is yielded as it is, with `error` set."""
    answers = answers_beside(path, lenient)
    for rec in iter_file(path, required, lenient):
        if rec.error is not None:
            yield rec
            continue
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


