"""A tool's JSON schema as a Python signature, and the names engines that need identifiers see.

Engines that build tool schemas from Python functions (TRL's `environment_factory`, through
`transformers.utils.get_json_schema`) read a method's name, its type hints and a Google-style docstring.
`python_tool` turns one `ToolSpec` into exactly that: an `inspect.Signature` of keyword-only parameters
(required ones without a default, the others defaulting to None), the matching ``__annotations__`` and a
docstring whose ``Args:`` section carries each parameter's description.

JSON types map to hints as `get_json_schema` maps them back: string -> str, integer -> int, number ->
float, boolean -> bool, null -> None, array -> list[items], object -> dict, a list of types -> a Union,
an ``enum`` of literals -> ``Literal[...]``. What a hint cannot carry (the properties of a nested object,
the items of a nested array of objects, formats, bounds) is appended to the parameter's description as
compact JSON, cut to `NESTED_SCHEMA_CHARS`; the environment still checks the call against the full
schema.

Names: a method name must be an identifier, not a keyword, not start with an underscore (private methods
are not tools) and not be one of `RESERVED` (the environment's own ``reset`` / ``get_reward``). A tool
or parameter name that is not such a name is mapped: every character outside ``[A-Za-z0-9_]`` becomes
``_``, a name that starts with a digit or an underscore or is a keyword or reserved gets the prefix
``tool_`` (a tool) or the suffix ``_`` (a parameter), and a name already taken gets ``_2``, ``_3``, ...
The model sees and calls the mapped name; the environment receives the original one (`ToolNames`).
"""

from __future__ import annotations

import inspect
import json
import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

from tooltune.schema import ToolSpec

RESERVED = frozenset({"reset", "get_reward"})
"""Method names an environment class keeps for itself (TRL calls them; they are never tools)."""

NESTED_SCHEMA_CHARS = 300
"""The JSON of a nested schema appended to a parameter's description is cut to this many characters."""

_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                            "null": type(None)}
_NOT_IDENTIFIER = re.compile(r"\W", re.ASCII)


def _clean(name: str) -> str:
    return _NOT_IDENTIFIER.sub("_", name) or "_"


def _unique(base: str, taken: set[str]) -> str:
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def method_name(tool: str, taken: set[str]) -> str:
    """The identifier a tool is called by (module docstring), unique among `taken` (which it joins)."""
    name = _clean(tool)
    if name[0].isdigit() or name.startswith("_") or keyword.iskeyword(name) or name in RESERVED:
        name = "tool_" + name
    return _unique(name, taken)


def parameter_name(param: str, taken: set[str]) -> str:
    """The identifier a parameter is passed as (module docstring), unique among `taken`."""
    name = _clean(param)
    if name[0].isdigit():
        name = "p_" + name
    if keyword.iskeyword(name) or name in ("self", "cls"):
        name += "_"
    return _unique(name, taken)


_SECTION = re.compile(r"\b(Args|Returns|Raises):")


def _one_line(text: Any, default: str) -> str:
    """A docstring fragment on one line, with the words that open a Google docstring section anywhere
    (transformers' parser cuts the text there) followed by a space before their colon."""
    line = _SECTION.sub(r"\1 :", " ".join(str(text or "").split()))
    return line or default


def type_hint(schema: Any) -> Any:
    """The Python type hint of a JSON schema (module docstring); `Any` when the schema names no type."""
    if not isinstance(schema, dict):
        return Any
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, (str, int, float, bool)) for v in enum):
        return Literal[tuple(enum)]
    declared = schema.get("type")
    types = declared if isinstance(declared, list) else [declared]
    hints = []
    for t in types:
        if t in _SCALARS:
            hints.append(_SCALARS[t])
        elif t == "array":
            items = type_hint(schema.get("items"))
            hints.append(list if items is Any else list[items])
        elif t == "object":
            hints.append(dict)
    hints = list(dict.fromkeys(hints))
    if not hints:
        return Any
    if len(hints) == 1:
        return hints[0]
    return Union[tuple(hints)]  # noqa: UP007  (a runtime Union of computed members)


def schema_detail(schema: Any) -> str:
    """The part of `schema` its type hint cannot carry, as compact JSON (empty when there is none)."""
    if not isinstance(schema, dict):
        return ""
    extra = {k: v for k, v in schema.items() if k not in ("type", "description", "enum")}
    items = extra.get("items")
    if isinstance(items, dict) and set(items) <= {"type"} and not isinstance(items.get("type"), list):
        extra.pop("items")  # list[str] says it all
    if not extra:
        return ""
    text = json.dumps(extra, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= NESTED_SCHEMA_CHARS else text[: NESTED_SCHEMA_CHARS - 1] + "…"


@dataclass(frozen=True)
class PythonTool:
    """One tool as a Python method: its name, signature, annotations and docstring, and the way back from
    the names the model uses to the tool's own."""

    tool: str
    method: str
    signature: inspect.Signature
    annotations: dict[str, Any]
    doc: str
    arguments: dict[str, str] = field(default_factory=dict)
    """Parameter name as the model passes it -> the tool's own argument name."""

    def original_arguments(self, given: dict[str, Any]) -> dict[str, Any]:
        """`given` with mapped parameter names turned back into the tool's own (unknown names kept)."""
        return {self.arguments.get(k, k): v for k, v in given.items()}


def python_tool(spec: ToolSpec, taken: set[str]) -> PythonTool:
    """`spec` as a method named uniquely among `taken` (module docstring)."""
    params = spec.parameters if isinstance(spec.parameters, dict) else {}
    props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
    required = set(params.get("required") or [])
    names: set[str] = set()
    arguments: dict[str, str] = {}
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    args_doc = []
    for original, schema in props.items():
        name = parameter_name(str(original), names)
        arguments[name] = str(original)
        hint = type_hint(schema)
        optional = original not in required
        annotations[name] = Optional[hint] if optional and hint is not Any else hint  # noqa: UP045
        parameters.append(inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, annotation=annotations[name],
            default=None if optional else inspect.Parameter.empty))
        text = _one_line(schema.get("description") if isinstance(schema, dict) else "", f"The {original}.")
        detail = schema_detail(schema)
        args_doc.append(f"    {name}: {text}" + (f" Schema: {detail}" if detail else ""))
    annotations["return"] = str
    description = _one_line(spec.description, f"The {spec.name} tool.")
    doc = description + ("\n\nArgs:\n" + "\n".join(args_doc) if args_doc else "") + \
        "\n\nReturns:\n    The tool's result as text (JSON), or an error message."
    return PythonTool(spec.name, method_name(spec.name, taken), inspect.Signature(parameters), annotations,
                      doc, arguments)


def python_tools(specs: Iterable[ToolSpec]) -> list[PythonTool]:
    """Every spec as a method, names unique across them, in order."""
    taken: set[str] = set()
    return [python_tool(s, taken) for s in specs]


__all__ = ["NESTED_SCHEMA_CHARS", "RESERVED", "PythonTool", "method_name", "parameter_name", "python_tool",
           "python_tools", "schema_detail", "type_hint"]
