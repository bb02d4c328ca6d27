"""The one schema every stage shares: ToolSpec, ToolCall, Sample, Parsed.

Data flows one way: raw record -> Sample -> prompt -> completion -> Parsed -> reward or verdict.
Every adapter produces `Sample`; every consumer reads it. All types round-trip losslessly through
plain JSON (`to_dict` / `from_dict`), so JSONL files, HF datasets columns and verl parquet rows
carry exactly the same information.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
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
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as e:
                raise _fail(f"{where}.arguments", f"not valid JSON ({e.msg})") from None
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise _fail(f"{where}.arguments", f"expected an object, got {type(args).__name__}")
        return cls(name=name, arguments=dict(args))


def calls_from_any(value: Any, where: str = "answer") -> list[ToolCall]:
    """Coerce a ground truth given as ToolCalls, dicts, a single dict, or a JSON string of those."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as e:
            raise _fail(where, f"not valid JSON ({e.msg})") from None
    if value is None:
        return []
    if isinstance(value, (ToolCall, Mapping)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise _fail(where, f"expected a list of calls, got {type(value).__name__}")
    return [ToolCall.from_dict(c, f"{where}[{i}]") for i, c in enumerate(value)]


# --------------------------------------------------------------------------------------------
# ToolSpec and parameter-type normalization

_SIMPLE_TYPES = {
    "str": "string",
    "string": "string",
    "text": "string",
    "char": "string",
    "int": "integer",
    "integer": "integer",
    "long": "integer",
    "short": "integer",
    "float": "number",
    "number": "number",
    "double": "number",
    "decimal": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "dict": "object",
    "object": "object",
    "hashmap": "object",
    "map": "object",
    "mapping": "object",
    "list": "array",
    "array": "array",
    "tuple": "array",
    "set": "array",
    "arraylist": "array",
    "null": "null",
    "none": "null",
}


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets: 'Dict[str, int], optional' -> ['Dict[str, int]', ' optional']."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "[(<{":
            depth += 1
        elif ch in "])>}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def type_to_schema(type_str: str) -> tuple[dict[str, Any], bool]:
    """Normalize a source type string to a JSON-Schema fragment; returns (schema, optional).

    Handles xLAM ("str, optional", "List[int]", "Dict[str, Any]", "Union[int, str]"), ToolACE/BFCL
    ("dict", "float", "tuple", "any") and Java/JavaScript-ish names ("String", "HashMap").
    Unknown types keep the original text under "x-source-type" instead of guessing.
    """
    raw = type_str.strip()
    parts = [p.strip() for p in _split_top(raw)]
    optional = any(p.lower() == "optional" for p in parts[1:])
    base = parts[0] if parts else ""
    lower = base.lower()
    if lower.startswith("optional[") and base.endswith("]"):
        schema, _ = type_to_schema(base[9:-1])
        return schema, True
    if "[" in base and base.endswith("]"):
        head = base[: base.index("[")].strip().lower()
        inner = base[base.index("[") + 1 : -1]
        if head in ("list", "set", "tuple", "sequence", "iterable", "array"):
            items, _ = type_to_schema(_split_top(inner)[0])
            return {"type": "array", "items": items}, optional
        if head in ("dict", "mapping", "map"):
            args = _split_top(inner)
            schema: dict[str, Any] = {"type": "object"}
            if len(args) == 2 and args[1].strip().lower() not in ("any", ""):
                schema["additionalProperties"], _ = type_to_schema(args[1])
            return schema, optional
        if head == "union":
            options = [type_to_schema(a)[0] for a in _split_top(inner) if a.strip().lower() != "none"]
            if any(a.strip().lower() == "none" for a in _split_top(inner)):
                optional = True
            return ({"anyOf": options} if len(options) > 1 else options[0]), optional
        if head == "literal":
            values = [v.strip().strip("'\"") for v in _split_top(inner)]
            return {"type": "string", "enum": values}, optional
    if lower in ("any", ""):
        return {}, optional
    if lower in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[lower]}, optional
    return {"x-source-type": base}, optional


def normalize_parameters(params: Any, where: str = "parameters") -> dict[str, Any]:
    """Turn any source's parameter description into a JSON-Schema object.

    Accepted shapes:
    - JSON Schema already: {"type": "object"|"dict", "properties": {...}, "required": [...]}
    - xLAM: {param: {"type": "str, optional", "description": ..., "default": ...}}
    - API-Bank input_parameters: {param: {"type": "str", "description": ...}}
    - a list of {"name", "type", "description", "required"} (some ToolACE dumps)
    """
    if params is None:
        return {"type": "object", "properties": {}, "required": []}
    if isinstance(params, list):
        props, required = {}, []
        for i, p in enumerate(params):
            if not isinstance(p, Mapping) or not isinstance(p.get("name"), str):
                raise _fail(f"{where}[{i}]", "expected an object with a string 'name'")
            entry = {k: v for k, v in p.items() if k not in ("name", "required")}
            props[p["name"]] = entry
            if p.get("required"):
                required.append(p["name"])
        params = {"type": "object", "properties": props, "required": required}
    if not isinstance(params, Mapping):
        raise _fail(where, f"expected an object, got {type(params).__name__}")
    is_schema = "properties" in params or str(params.get("type", "")).lower() in ("object", "dict")
    if is_schema:
        props_in = params.get("properties") or {}
        if not isinstance(props_in, Mapping):
            raise _fail(f"{where}.properties", "expected an object")
        required_in = params.get("required") or []
        if not isinstance(required_in, list):
            raise _fail(f"{where}.required", "expected a list of names")
        required = [r for r in required_in if isinstance(r, str)]
        extra = {k: v for k, v in params.items() if k not in ("type", "properties", "required")}
    else:  # flat mapping name -> description (xLAM, API-Bank)
        props_in, required, extra = params, None, {}
    props: dict[str, Any] = {}
    auto_required: list[str] = []
    for name, spec in props_in.items():
        prop, optional = _normalize_property(spec, f"{where}.{name}")
        props[name] = prop
        if not optional and "default" not in prop:
            auto_required.append(name)
    return {
        "type": "object",
        "properties": props,
        "required": required if required is not None else auto_required,
        **extra,
    }


def _normalize_property(spec: Any, where: str) -> tuple[dict[str, Any], bool]:
    if isinstance(spec, str):  # bare type string
        return type_to_schema(spec)
    if not isinstance(spec, Mapping):
        raise _fail(where, f"expected an object describing the parameter, got {type(spec).__name__}")
    out = dict(spec)
    optional = False
    t = spec.get("type")
    if isinstance(t, str):
        schema, optional = type_to_schema(t)
        out.pop("type")
        for k, v in schema.items():
            out.setdefault(k, v) if k != "type" else out.__setitem__(k, v)
    if isinstance(out.get("items"), Mapping):
        out["items"], _ = _normalize_property(out["items"], f"{where}.items")
    if isinstance(out.get("properties"), Mapping):
        nested = normalize_parameters(
            {"type": "object", **{k: v for k, v in out.items() if k != "type"}}, where
        )
        out.update(nested)
    return out, optional


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
        """Build from a canonical dict or any source's shape (OpenAI {"type": "function", "function": …},
        xLAM, ToolACE, BFCL, API-Bank {"name", "description", "input_parameters"})."""
        if isinstance(d, ToolSpec):
            return d
        if not isinstance(d, Mapping):
            raise _fail(where, f"expected an object, got {type(d).__name__}")
        if isinstance(d.get("function"), Mapping):  # OpenAI tools format
            d = d["function"]
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"{where}.name", f"expected a non-empty string, got {name!r:.80}")
        desc = d.get("description") or ""
        if not isinstance(desc, str):
            desc = json.dumps(desc, ensure_ascii=False)
        params = d.get("parameters", d.get("input_parameters"))
        return cls(
            name=name, description=desc, parameters=normalize_parameters(params, f"{where}.parameters")
        )

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
        return cls(
            id=str(d["id"]),
            source=str(d.get("source", "")),
            category=d["category"],
            messages=d["messages"],
            tools=d["tools"],
            answer=d["answer"],
            meta=dict(d.get("meta") or {}),
        )

    @classmethod
    def from_json(cls, line: str, where: str = "sample") -> Sample:
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise _fail(where, f"not valid JSON ({e.msg} at column {e.colno})") from None
        return cls.from_dict(d, where)


def read_jsonl(path: str, limit: int | None = None) -> list[Sample]:
    """Read canonical JSONL; errors name the file, line and field."""
    out: list[Sample] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            out.append(Sample.from_json(line, where=f"{path}:{lineno}"))
            if limit is not None and len(out) >= limit:
                break
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
