"""Reading data records as hostile input: JSON decoded with a bound on nesting, integers within Python's
digit limit, no NaN or Infinity; a line's bytes decoded with the byte and column named; compressed files
recognised. Every failure is a `RecordValueError` naming where it happened."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any


class SchemaError(ValueError):
    """A record does not fit the schema; the message names the record and the field."""


def _fail(where: str, msg: str) -> SchemaError:
    return SchemaError(f"{where}: {msg}")


# --------------------------------------------------------------------------------------------
# JSON records: decoding and encoding with the checks every data record must pass

_SURROGATE = re.compile("[\ud800-\udfff]")
"""Lone surrogates: JSON with ensure_ascii=False cannot write them as UTF-8, so they are escaped."""

MAX_RECORD_DEPTH = 100
"""Deepest nesting of lists and objects accepted in a data record (a raw record, a sample, or JSON text
inside one of their fields). Model answers are bounded far lower (`tooltune.parsing.MAX_DEPTH`, 32);
records carry whole tool schemas and histories, so this bound is generous. It keeps every recursive
step downstream (conversion, serialization, rendering, hashing) far below Python's recursion limit."""


class RecordValueError(SchemaError):
    """JSON text or a value that no record may hold; `reason` is the stable rejection key.

    Reasons: `json_error` (not JSON), `invalid_utf8`, `too_deep` (nesting over `MAX_RECORD_DEPTH`),
    `non_finite_number` (NaN, Infinity, or a literal such as 1e999 that overflows a float),
    `huge_integer` (over Python's int-string conversion limit), `not_json` (a value JSON cannot hold).
    """

    def __init__(self, reason: str, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.reason = reason
        self.where = where
        self.message = message


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NonFinite(text)
    return value


# decoders are built once: json.loads with hooks builds a new decoder on every call
_FINITE_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
_ANY_DECODER = json.JSONDecoder()


def _int_digit_limit() -> int:
    """Python's int-string conversion limit in digits (0: no limit; Pythons before it existed)."""
    return sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0


def _huge_int_message() -> str:
    return f"an integer longer than Python's limit of {_int_digit_limit()} digits"


def _is_huge_int(v: int) -> bool:
    limit = _int_digit_limit()
    if not limit or v.bit_length() < 3 * limit:  # fewer than 3 bits per digit: far below the limit
        return False
    try:
        str(v)
    except ValueError:
        return True
    return False


def _path(where: str, keys: tuple[Any, ...], shown: int = 12) -> str:
    """`where` and the keys as `.key` / `[index]`; a long path keeps its first `shown` keys."""
    path = where + "".join(f"[{k}]" if isinstance(k, int) else f".{k!s:.40}" for k in keys[:shown])
    if not where:
        path = path.removeprefix(".")
    return path + (f"…(+{len(keys) - shown} keys)" if len(keys) > shown else "")


def find_fault(
    value: Any, max_depth: int = MAX_RECORD_DEPTH, finite: bool = True
) -> tuple[str, tuple[Any, ...], str] | None:
    """The first value no record may hold, as (reason, path of keys, message), or None.

    Walks iteratively (so a deep value cannot exhaust the stack) and stops at the first fault:
    containers nested deeper than `max_depth`, non-finite floats (if `finite`), integers over
    Python's int-string conversion limit.
    """
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 0, ())]
    while stack:
        v, depth, path = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            if depth >= max_depth:
                return "too_deep", path, f"nesting deeper than {max_depth} levels"
            items = v.items() if isinstance(v, dict) else enumerate(v)
            stack.extend((x, depth + 1, (*path, k)) for k, x in items)
        elif isinstance(v, float):
            if finite and not math.isfinite(v):
                return "non_finite_number", path, f"{v} is not a finite number"
        elif type(v) is int and _is_huge_int(v):
            return "huge_integer", path, _huge_int_message()
    return None


def _raise_fault(value: Any, where: str, max_depth: int, finite: bool) -> None:
    fault = find_fault(value, max_depth, finite)
    if fault is not None:
        reason, keys, message = fault
        raise RecordValueError(reason, _path(where, keys), message)


def _decode_failure(e: Exception, where: str) -> RecordValueError:
    """The RecordValueError for what the JSON decoder raised."""
    if isinstance(e, _NonFinite):
        return RecordValueError("non_finite_number", where, f"{e} is not a finite number")
    if isinstance(e, json.JSONDecodeError):
        return RecordValueError("json_error", where, f"not valid JSON ({e.msg} at column {e.colno})")
    if isinstance(e, RecursionError):
        return RecordValueError("too_deep", where, f"nesting deeper than {MAX_RECORD_DEPTH} levels")
    # the only other error of the C scanner: an integer over the digit limit
    return RecordValueError("huge_integer", where, _huge_int_message())


def loads_record(
    text: str, where: str = "record", max_depth: int | None = MAX_RECORD_DEPTH, finite: bool = True
) -> Any:
    """`json.loads` for data records: a RecordValueError (a SchemaError naming `where` and the cause)
    for text that is not JSON, nests deeper than `max_depth`, holds an integer over Python's
    digit limit or, if `finite`, NaN, Infinity or a float literal that overflows (1e999).

    `max_depth=None` skips the depth check (for callers that check the values they build); nesting
    too deep for the decoder itself is still refused."""
    try:
        value = (_FINITE_DECODER if finite else _ANY_DECODER).decode(text)
    except (ValueError, RecursionError) as e:
        raise _decode_failure(e, where) from None
    # counting brackets runs at C speed; only text that could nest too deep pays for the walk
    if max_depth is not None and text.count("[") + text.count("{") > max_depth:
        _raise_fault(value, where, max_depth, finite=False)
    return value


def raw_decode_record(
    text: str,
    start: int,
    where: str = "record",
    max_depth: int | None = MAX_RECORD_DEPTH,
    finite: bool = True,
) -> tuple[Any, int]:
    """`JSONDecoder.raw_decode` (one JSON value at `start`, and where it ends) with the checks of
    `loads_record`."""
    try:
        value, end = (_FINITE_DECODER if finite else _ANY_DECODER).raw_decode(text, start)
    except (ValueError, RecursionError) as e:
        raise _decode_failure(e, where) from None
    if max_depth is not None and text.count("[", start, end) + text.count("{", start, end) > max_depth:
        _raise_fault(value, where, max_depth, finite=False)
    return value, end


def dumps_record(
    obj: Any,
    where: str = "record",
    max_depth: int = MAX_RECORD_DEPTH,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """`dumps_line` for a data record, refusing what `loads_record` refuses: a RecordValueError naming
    the field (`where` plus the path) for a non-finite number, nesting deeper than `max_depth`, an
    integer over the digit limit, or a value JSON cannot hold (unless `default` converts it)."""
    try:
        line = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=default)
    except (ValueError, RecursionError, TypeError) as e:
        _raise_fault(obj, where, max_depth, finite=True)
        if isinstance(e, RecursionError):
            raise RecordValueError("too_deep", where, f"nesting deeper than {max_depth} levels") from None
        raise RecordValueError("not_json", where, str(e)) from None
    if line.count("[") + line.count("{") > max_depth:
        _raise_fault(obj, where, max_depth, finite=True)
    return json.dumps(obj, allow_nan=False, default=default) if _SURROGATE.search(line) else line


_COMPRESSED = {
    b"\x1f\x8b": "gzip",
    b"PK\x03\x04": "zip",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
}


def compressed_format(head: bytes) -> str | None:
    """The compression format whose magic bytes start `head` (gzip, zip, bzip2, xz, zstd), or None."""
    return next((name for magic, name in _COMPRESSED.items() if head.startswith(magic)), None)


def decode_line(raw: bytes, where: str) -> str:
    """One line of a UTF-8 file; a RecordValueError (`invalid_utf8`) names `where` and the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        hint = compressed_format(raw)
        raise RecordValueError(
            "invalid_utf8",
            where,
            f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at byte {e.start + 1} of the line: {e.reason})"
            + (f"; the file is {hint}-compressed: decompress it first" if hint else ""),
        ) from None
