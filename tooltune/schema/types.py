"""The canonical types: ToolSpec, ToolCall, Sample, Parsed, and reading/writing canonical JSONL."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tooltune.schema.records import (
    _SURROGATE,
    SchemaError,
    _fail,
    decode_line,
    loads_record,
)

CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance", "multi_step")
"""Sample categories, following BFCL / R2IF naming; `multi_step` has tool calls or results in its history."""

ROLES = ("system", "user", "assistant", "tool")


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


def iter_jsonl(path: str, limit: int | None = None) -> Iterator[Sample]:
    """The samples of a canonical JSONL file one at a time (memory: one line), with the checks and
    errors of `read_jsonl`; a bad line raises when the iteration reaches it."""
    n = 0
    try:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if limit is not None and n >= limit:
                    break
                try:
                    line = decode_line(raw, "")
                    if not line.strip():
                        continue
                    sample = Sample.from_dict(loads_record(line, ""), "sample")
                except SchemaError as e:
                    raise SchemaError(f"{path}:{lineno}: {e}") from None
                n += 1
                yield sample
    except (IsADirectoryError, PermissionError) as e:
        raise SchemaError(f"{path}: cannot read the file ({e.strerror})") from None


def read_jsonl(path: str, limit: int | None = None) -> list[Sample]:
    """Read canonical JSONL; every error is a SchemaError naming the file, the line and the field or cause.

    Each line is decoded on its own: invalid UTF-8, text that is not JSON, nesting deeper than
    `MAX_RECORD_DEPTH`, NaN/Infinity, integers over Python's digit limit and records that do not fit
    the schema all stop the read at `file:line`. A compressed or binary file fails at its first line.
    A missing file raises FileNotFoundError. `iter_jsonl` reads the same lines one at a time.
    """
    return list(iter_jsonl(path, limit))


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
