"""Source tool descriptions -> canonical `ToolSpec`: type strings and parameter shapes of every source.

Public sets describe parameters in many dialects: xLAM ("str, optional", "List[int]",
"Dict[str, Any]", "Union[int, str]"), ToolACE / BFCL ("dict", "float", "tuple", "any"), Java- and
JavaScript-ish names ("String", "HashMap"), API-Bank's `input_parameters`, OpenAI's
`{"type": "function", "function": {...}}` wrapper, and lists of `{"name", "type", "required"}`.
Adapters call `tool_spec_from_source`; everything after them sees JSON Schema only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tooltune.schema import SchemaError, ToolSpec


def _fail(where: str, msg: str) -> SchemaError:
    return SchemaError(f"{where}: {msg}")


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


MAX_TYPE_DEPTH = 16
"""Deepest bracket nesting of a source type string ("List[Dict[str, int]]" is 2 deep). Each level is
one recursive call over the rest of the string, so a hostile type string must not nest without bound."""


def _type_depth(s: str) -> int:
    depth = best = 0
    for ch in s:
        if ch in "[(<{":
            depth += 1
            best = max(best, depth)
        elif ch in "])>}":
            depth -= 1
    return best


def type_to_schema(type_str: str, where: str = "type") -> tuple[dict[str, Any], bool]:
    """Normalize a source type string to a JSON-Schema fragment; returns (schema, optional).

    Handles xLAM ("str, optional", "List[int]", "Dict[str, Any]", "Union[int, str]"), ToolACE/BFCL
    ("dict", "float", "tuple", "any") and Java/JavaScript-ish names ("String", "HashMap").
    Unknown types keep the original text under "x-source-type" instead of guessing. A type string
    nesting deeper than `MAX_TYPE_DEPTH` raises SchemaError.
    """
    raw = type_str.strip()
    # counting brackets runs at C speed; only strings that could nest too deep pay for the scan
    if raw.count("[") + raw.count("(") + raw.count("<") + raw.count("{") > MAX_TYPE_DEPTH:
        depth = _type_depth(raw)
        if depth > MAX_TYPE_DEPTH:
            raise _fail(where, f"type string {raw[:60]!r} nests {depth} deep (at most {MAX_TYPE_DEPTH})")
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
        return type_to_schema(spec, f"{where}.type")
    if not isinstance(spec, Mapping):
        raise _fail(where, f"expected an object describing the parameter, got {type(spec).__name__}")
    out = dict(spec)
    optional = False
    t = spec.get("type")
    if isinstance(t, str):
        schema, optional = type_to_schema(t, f"{where}.type")
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


def tool_spec_from_source(d: Any, where: str = "tool") -> ToolSpec:
    """A canonical ToolSpec from any source's tool shape (OpenAI {"type": "function", "function": …},
    xLAM, ToolACE, BFCL, API-Bank {"name", "description", "input_parameters"})."""
    if isinstance(d, ToolSpec):
        return d
    if isinstance(d, Mapping) and isinstance(d.get("function"), Mapping):  # OpenAI tools format
        d = d["function"]
    head = {k: v for k, v in d.items() if k not in ("parameters", "input_parameters")} if isinstance(
        d, Mapping) else d
    named = ToolSpec.from_dict(head, where)  # checks the object, its name and description
    params = d.get("parameters", d.get("input_parameters"))
    return ToolSpec(named.name, named.description, normalize_parameters(params, f"{where}.parameters"))
