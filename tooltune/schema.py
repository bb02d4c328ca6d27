"""The one schema every stage shares: ToolSpec, ToolCall, Sample, Parsed.

Data flows one way: raw record -> Sample -> prompt -> completion -> Parsed -> reward or verdict.
Every adapter produces `Sample`; every consumer reads it. All types round-trip losslessly through
plain JSON (`to_dict` / `from_dict`), so JSONL files, HF datasets columns and verl parquet rows
carry exactly the same information.

Data records are decoded and encoded with `loads_record` / `dumps_record`, which bound nesting
(`MAX_RECORD_DEPTH`) and refuse non-finite numbers and over-long integers with a `RecordValueError`
(a SchemaError with a stable `reason`); `read_jsonl` names `file:line` for every bad line.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance", "multi_step")
"""Sample categories, following BFCL / R2IF naming; `multi_step` has tool calls or results in its history."""

ROLES = ("system", "user", "assistant", "tool")


class SchemaError(ValueError):
    """A record does not fit the schema; the message names the record and the field."""


def _fail(where: str, msg: str) -> SchemaError:
    return SchemaError(f"{where}: {msg}")


# --------------------------------------------------------------------------------------------
# JSON records: decoding and encoding with the checks every data record must pass

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


# --------------------------------------------------------------------------------------------
# ToolCall


@dataclass(frozen=True)
class ToolCall:
    """One function call: a name and its keyword arguments (JSON values, types significant)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, d: Any, where: str = "call") -> ToolCall:
        if isinstance(d, ToolCall):
            return d
        if not isinstance(d, Mapping):
            raise _fail(where, f"expected an object with 'name' and 'arguments', got {type(d).__name__}")
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"{where}.name", f"expected a non-empty string, got {name!r:.80}")
        args = d.get("arguments", {})
        if isinstance(args, str):  # OpenAI-style serialized arguments
            args = loads_record(args, f"{where}.arguments") if args.strip() else {}
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise _fail(f"{where}.arguments", f"expected an object, got {type(args).__name__}")
        return cls(name=name, arguments=dict(args))


def calls_from_any(value: Any, where: str = "answer") -> list[ToolCall]:
    """Coerce a ground truth given as ToolCalls, dicts, a single dict, or a JSON string of those."""
    if isinstance(value, str):
        value = loads_record(value, where) if value.strip() else []
    if value is None:
        return []
    if isinstance(value, (ToolCall, Mapping)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise _fail(where, f"expected a list of calls, got {type(value).__name__}")
    return [ToolCall.from_dict(c, f"{where}[{i}]") for i, c in enumerate(value)]


# --------------------------------------------------------------------------------------------
# ToolSpec

@dataclass(frozen=True)
class ToolSpec:
    """A callable tool: name, description and parameters as a JSON-Schema object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}, "required": []}
    )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @classmethod
    def from_dict(cls, d: Any, where: str = "tool") -> ToolSpec:
        """Build from the canonical dict {"name", "description", "parameters": JSON-Schema object}.

        Source shapes (OpenAI's function wrapper, xLAM / API-Bank type strings, BFCL's "dict") are the
        adapters' business: `tooltune.data.sources.types.tool_spec_from_source` normalizes them."""
        if isinstance(d, ToolSpec):
            return d
        if not isinstance(d, Mapping):
            raise _fail(where, f"expected an object, got {type(d).__name__}")
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"{where}.name", f"expected a non-empty string, got {name!r:.80}")
        desc = d.get("description") or ""
        if not isinstance(desc, str):
            desc = json.dumps(desc, ensure_ascii=False)
        params = d.get("parameters")
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise _fail(f"{where}.parameters", f"expected a JSON-Schema object, got {type(params).__name__}")
        params = {"type": "object", "properties": {}, "required": [], **params}
        props, required = params["properties"], params["required"]
        if not isinstance(props, Mapping) or not all(isinstance(p, Mapping) for p in props.values()):
            raise _fail(f"{where}.parameters.properties", "expected an object of parameter schemas")
        for pname, prop in props.items():
            kind = prop.get("type", "")
            if not isinstance(kind, str) and not (
                isinstance(kind, list) and all(isinstance(k, str) for k in kind)
            ):
                raise _fail(f"{where}.parameters.properties.{pname}.type", "expected a type name or a list")
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise _fail(f"{where}.parameters.required", "expected a list of parameter names")
        return cls(name=name, description=desc, parameters=params)

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))

    @property
    def properties(self) -> dict[str, Any]:
        return dict(self.parameters.get("properties", {}))


# --------------------------------------------------------------------------------------------
# Sample

_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps_line(obj: Any) -> str:
    """`json.dumps` for JSONL files: readable UTF-8, except that lone surrogates are escaped."""
    line = json.dumps(obj, ensure_ascii=False)
    return json.dumps(obj) if _SURROGATE.search(line) else line


def _check_messages(messages: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(messages, list):
        raise _fail(where, f"expected a list of messages, got {type(messages).__name__}")
    out = []
    for i, m in enumerate(messages):
        w = f"{where}[{i}]"
        if not isinstance(m, Mapping):
            raise _fail(w, "expected an object with 'role' and 'content'")
        role = m.get("role")
        if role not in ROLES:
            raise _fail(f"{w}.role", f"expected one of {ROLES}, got {role!r:.40}")
        content = m.get("content", "")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise _fail(f"{w}.content", f"expected a string, got {type(content).__name__}")
        msg = dict(m)
        msg["content"] = content
        if "tool_calls" in m:
            msg["tool_calls"] = [c.to_dict() for c in calls_from_any(m["tool_calls"], f"{w}.tool_calls")]
        out.append(msg)
    return out


@dataclass
class Sample:
    """One training or evaluation example.

    messages: the conversation up to the point where the model must act; the last message is the
        user's request (or a tool result in multi-step samples). Message dicts use roles
        system/user/assistant/tool; assistant turns may carry `tool_calls` (list of {"name",
        "arguments"}) and `reasoning` (the earlier thinking text); tool turns may carry `name`.
    answer: the calls the model should make now; an empty list means no tool should be called.
    meta: anything a source must keep (e.g. BFCL's acceptable-value lists, raw ids, positions).
    """

    id: str
    source: str
    category: str
    messages: list[dict[str, Any]]
    tools: list[ToolSpec]
    answer: list[ToolCall]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"sample {self.id!r}"
        if not isinstance(self.id, str) or not self.id:
            raise _fail("sample", f"id must be a non-empty string, got {self.id!r:.40}")
        if self.category not in CATEGORIES:
            raise _fail(f"{where}.category", f"expected one of {CATEGORIES}, got {self.category!r}")
        self.messages = _check_messages(self.messages, f"{where}.messages")
        self.tools = [ToolSpec.from_dict(t, f"{where}.tools[{i}]") for i, t in enumerate(self.tools)]
        self.answer = calls_from_any(self.answer, f"{where}.answer")

    @property
    def is_irrelevant(self) -> bool:
        return not self.answer

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "category": self.category,
            "messages": self.messages,
            "tools": [t.to_dict() for t in self.tools],
            "answer": [c.to_dict() for c in self.answer],
            "meta": self.meta,
        }

    def to_json(self) -> str:
        """One JSON line; lone surrogates (from hostile text) are \\u-escaped so files stay valid UTF-8."""
        return dumps_line(self.to_dict())

    @classmethod
    def from_dict(cls, d: Any, where: str = "sample") -> Sample:
        if not isinstance(d, Mapping):
            raise _fail(where, f"expected an object, got {type(d).__name__}")
        missing = [k for k in ("id", "category", "messages", "tools", "answer") if k not in d]
        if missing:
            raise _fail(where, f"missing field(s) {', '.join(missing)}")
        if not isinstance(d["tools"], list):
            raise _fail(f"{where}.tools", f"expected a list of tools, got {type(d['tools']).__name__}")
        meta = d.get("meta") or {}
        if not isinstance(meta, Mapping):
            raise _fail(f"{where}.meta", f"expected an object, got {type(meta).__name__}")
        return cls(
            id=str(d["id"]),
            source=str(d.get("source", "")),
            category=d["category"],
            messages=d["messages"],
            tools=d["tools"],
            answer=d["answer"],
            meta=dict(meta),
        )

    @classmethod
    def from_json(cls, line: str, where: str = "sample") -> Sample:
        """One JSON line; a SchemaError names `where` and the cause (the checks of `loads_record`)."""
        return cls.from_dict(loads_record(line, where), where)


def read_jsonl(path: str, limit: int | None = None) -> list[Sample]:
    """Read canonical JSONL; every error is a SchemaError naming the file, the line and the field or cause.

    Each line is decoded on its own: invalid UTF-8, text that is not JSON, nesting deeper than
    `MAX_RECORD_DEPTH`, NaN/Infinity, integers over Python's digit limit and records that do not fit
    the schema all stop the read at `file:line`. A compressed or binary file fails at its first line.
    A missing file raises FileNotFoundError.
    """
    out: list[Sample] = []
    try:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    line = decode_line(raw, "")
                    if not line.strip():
                        continue
                    out.append(Sample.from_dict(loads_record(line, ""), "sample"))
                except SchemaError as e:
                    raise SchemaError(f"{path}:{lineno}: {e}") from None
                if limit is not None and len(out) >= limit:
                    break
    except (IsADirectoryError, PermissionError) as e:
        raise SchemaError(f"{path}: cannot read the file ({e.strerror})") from None
    return out


def write_jsonl(samples: Iterable[Sample], path: str) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for s in samples:
            f.write(s.to_json() + "\n")
            n += 1
    return n


# --------------------------------------------------------------------------------------------
# Parsed completion


@dataclass
class Parsed:
    """What `parsing.parse_completion` extracts from model text. Never raised, always returned.

    calls: the decoded calls ([] = an explicit no-call answer), or None when no call block could be
        decoded at all. format_ok: the strict (or chosen-mode) format verdict. error: why not, if not.
    rejected: the R2IF rejection text was given instead of calls (then calls == []).
    """

    reasoning: str | None
    calls: list[ToolCall] | None
    format_ok: bool
    error: str | None = None
    rejected: bool = False
