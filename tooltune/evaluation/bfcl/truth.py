"""BFCL ground truth as calls a perfect model would make (for the harness's own end-to-end checks).

Single-turn: the first acceptable value of each argument; an optional argument whose acceptable values
include "" is omitted (a required one takes its first non-empty value, or "" when that is the only one).
Java and JavaScript entries expect argument values as source-code strings (`"true"`, `"5L"`,
`new ArrayList<>(Arrays.asList(1, 2))`, `[1, 2]`), which the official checker converts back; values
are rendered that way here. Multi-turn ground truths are call strings (`sort('a.txt')`): they are
read with `ast.parse` (never evaluated), positional arguments named from the function document.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from tooltune.data.sources.bfcl import resolve
from tooltune.schema import ToolCall

_JAVA_ELEM = {"String": "String", "integer": "int", "long": "long", "double": "double", "float": "float",
              "boolean": "boolean", "char": "char", "any": "Object"}


def _first(opts: Any, chars: bool = False) -> Any:
    # The Java checker reads a bare string where it expects options as a list of characters.
    return opts[0] if isinstance(opts, (list, str) if chars else list) and opts else opts


def _java_scalar(v: Any, typ: str | None = None) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if typ == "long" and isinstance(v, int):
        return f"{v}L"
    if typ == "float" and isinstance(v, (int, float)):
        return f"{v}f"
    return str(v)  # strings unquoted: the checker compares collection elements without quotes


def java_literal(v: Any, schema: Mapping[str, Any]) -> str:
    """A Java source string for value `v` of BFCL Java type `schema["type"]` (strings pass as-is)."""
    typ = schema.get("type")
    if isinstance(v, str):
        return v  # a variable name or already-Java text
    item = (schema.get("items") or {}).get("type")
    if typ == "Array":
        return f"new {_JAVA_ELEM.get(item or 'any', 'Object')}[]{{" + \
            ", ".join(_java_scalar(x, item) for x in v) + "}"
    if typ == "ArrayList":  # the checker unquotes String elements of an ArrayList, not of an Array
        return "new ArrayList<>(Arrays.asList(" + ", ".join(
            json.dumps(x) if item == "String" else _java_scalar(x, item) for x in v) + "))"
    if typ == "HashMap":
        puts = " ".join(f"put({json.dumps(k)}, {_java_scalar(_first(x, chars=True))});" for k, x in v.items())
        return f"new HashMap<String, String>() {{{{ {puts} }}}}"
    return _java_scalar(v, typ)


def js_literal(v: Any, schema: Mapping[str, Any]) -> str:
    """A JavaScript source string for `v` of BFCL JavaScript type `schema["type"]`."""
    typ = schema.get("type")
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if typ == "dict" and isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {js_literal(x, {})}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(json.dumps(x) if isinstance(x, str) else js_literal(x, {}) for x in v) + "]"
    return str(v)


def single_turn_calls(ground_truth: Any, functions: list[dict[str, Any]], category: str) -> list[ToolCall]:
    """The ground-truth calls of a single-turn entry, values in the entry's language."""

    params = {f["name"]: f.get("parameters") or {} for f in functions}
    render = java_literal if category == "simple_java" else js_literal if category == "simple_javascript" \
        else None
    calls = []
    for item in ground_truth or []:
        (name, args), = item.items()
        props = params.get(name, {}).get("properties") or {}
        required = params.get(name, {}).get("required") or []
        resolved = {}
        for k, opts in args.items():
            if k in required and "" in opts:  # "" only means "may be omitted" for optional arguments
                opts = [o for o in opts if o != ""]
            present, v = resolve(opts, props.get(k)) if opts else (True, "")
            if present:
                resolved[k] = render(v, props.get(k) or {}) if render else v
        calls.append(ToolCall(name, resolved))
    return calls


def parse_call_string(text: str, functions: list[dict[str, Any]]) -> ToolCall:
    """`name(a, b=1)` (a multi-turn ground-truth string) -> ToolCall, positional args named by the doc."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text!r}")
    name = node.func.id
    doc = next((f for f in functions if f["name"] == name), None)
    order = list(((doc or {}).get("parameters") or {}).get("properties") or {})
    args = {}
    for i, a in enumerate(node.args):
        if i >= len(order):
            raise ValueError(f"{text!r}: positional argument {i} has no name in the function document")
        args[order[i]] = ast.literal_eval(a)
    for kw in node.keywords:
        args[kw.arg] = ast.literal_eval(kw.value)
    return ToolCall(name, args)
