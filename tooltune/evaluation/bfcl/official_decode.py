"""BFCL's decoder of Python-call answers (`bfcl_eval.model_handler.utils.default_decode_execute_prompting`),
rule for rule, without its `eval`.

What BFCL does with one step's text: strip backticks, newlines and spaces at both ends; wrap it in
``[`` ``]`` unless it already starts / ends with them; `ast.parse` it; every element must be a call.
A call's name is its dotted attribute chain; positional arguments are dropped; each keyword value is
read by `resolve_ast_by_type`:

- a constant as it is (``...`` as the text ``"..."``); a bare name as its text (``true`` -> ``"true"``);
- a unary operation as the negated value of its constant operand, whatever the operator (``+5`` -> -5,
  ``not True`` -> -1), failing on any other operand;
- lists, tuples and dicts element by element; a call without keyword arguments as its source text
  (``f(1)`` -> ``"f(1)"``); a call with keyword arguments as a nested call; a subscript as its source text;
- a binary operation by `eval` of its source text (BFCL's own `eval`; here only arithmetic on literals,
  below); a lambda always fails; anything else fails.

The calls are then written back as text by `decoded_output_to_execution_list`: values with `repr`,
except dicts: a dict whose values are all dicts is written as a call of its first key (an empty dict
fails), any other dict as ``{'k': v}`` with its keys quoted as text (``{1: 'a'}`` -> ``{'1': 'a'}``).
Any failure anywhere makes BFCL skip the step.

Binary operations: BFCL evaluates them with `eval` in its module; we compute only arithmetic on literal
operands (numbers, text / list / tuple concatenation and repetition, ``%`` formatting without widths or
precisions) within bounds (`MAX_DIGITS` digits, `MAX_BLOCK_CHARS` elements or characters). Any other
expression (names, calls, attributes, oversized results) fails the step; for names and calls BFCL's
`eval` fails too unless the name happens to exist in its module. Texts longer than `MAX_BLOCK_CHARS` are
not read.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Any

from tooltune.parsing.limits import MAX_BLOCK_CHARS

MAX_DIGITS = 4300
"""Python's default limit on the digits of an integer written as text: `repr` of a longer one fails."""

_SEQUENCE = (str, bytes, list, tuple)
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
        ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
        ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}


class DecodeFailure(Exception):
    """BFCL's decoder fails on this step (or would compute it with `eval`, which we do not)."""


def _bracketed(text: Any) -> tuple[str | None, str | None]:
    """BFCL's first step of both decoders: the text stripped of backticks and wrapped in ``[`` ``]``, or
    (None, why) for what is not a text or is too long to read."""
    if not isinstance(text, str):
        return None, f"not a text ({type(text).__name__})"
    if len(text) > MAX_BLOCK_CHARS:
        return None, f"longer than {MAX_BLOCK_CHARS} characters"
    result = text.strip("`\n ")
    if not result.startswith("["):
        result = "[" + result
    if not result.endswith("]"):
        result = result + "]"
    return result, None


def bfcl_decode_execute(text: str) -> tuple[list[str] | None, str | None]:
    """The call strings BFCL's decoder builds from `text`, or (None, why) when it fails.

    The strings are only built, never run: callers check each with `official.literal_call`
    before BFCL's executor sees it. [] means BFCL decoded an empty call list (also a skipped step)."""
    result, why = _bracketed(text)
    if result is None:
        return None, why
    try:
        calls = _parse(result)
        return [f"{name}(" + ", ".join(f"{k}={_render(v)}" for k, v in args.items()) + ")"
                for call in calls for name, args in call.items()], None
    except Exception as e:  # any failure of BFCL's decoder skips the step; nothing here raises further
        return None, f"{type(e).__name__}: {str(e)[:200]}"


def bfcl_decode_ast(text: str, has_tool_call_tag: bool = False
                    ) -> tuple[list[dict[str, Any]] | None, str | None]:
    """What BFCL's `default_decode_ast_prompting` returns for the Python-call format (`[{name: {arg:
    value}}]`, the form `ast_checker` reads), or (None, why) when it raises: the same wrapping in ``[``
    ``]``, then with `has_tool_call_tag` the text inside the first ``<TOOLCALL>...</TOOLCALL>``, then the
    calls read as above (without `eval`)."""
    result, why = _bracketed(text)
    if result is None:
        return None, why
    if has_tool_call_tag:
        match = re.search(r"<TOOLCALL>(.*?)</TOOLCALL>", result, re.DOTALL)
        if not match:
            return None, "No tool call tag found in input string"
        result = match.group(1).strip()
    try:
        return _parse(result), None
    except Exception as e:  # any failure of BFCL's decoder fails the entry; nothing here raises further
        return None, f"{type(e).__name__}: {str(e)[:200]}"


def _parse(text: str) -> list[dict[str, dict[Any, Any]]]:
    body = ast.parse(text.strip().strip("'"), mode="eval").body
    if isinstance(body, ast.Call):
        return [_call(body)]
    elts = getattr(body, "elts", None)
    if elts is None:
        raise DecodeFailure(f"a {type(body).__name__}, not a list of calls")
    out = []
    for elem in elts:
        if not isinstance(elem, ast.Call):
            raise DecodeFailure(f"a {type(elem).__name__} where a call is expected")
        out.append(_call(elem))
    return out


def _call(node: ast.Call) -> dict[str, dict[Any, Any]]:
    parts, func = [], node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return {".".join(reversed(parts)): {kw.arg: _value(kw.value) for kw in node.keywords}}


def _value(node: Any) -> Any:
    """BFCL's `resolve_ast_by_type`."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.operand, ast.Constant):
            raise DecodeFailure("a unary operation on something other than a constant")
        return -node.operand.value
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise DecodeFailure("dict unpacking")
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp):
        return _arith(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _call(node) if node.keywords else ast.unparse(node)
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise DecodeFailure(f"unsupported expression {type(node).__name__}")


def _arith(node: Any) -> Any:
    """What `eval` gives for an expression of literals and arithmetic (Python's own semantics)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_arith(node.operand))
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_arith(v) for v in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _arith(node.left), _arith(node.right)
        _check_bounds(node.op, left, right)
        value = _OPS[type(node.op)](left, right)
        if isinstance(value, int) and value.bit_length() > 4 * MAX_DIGITS:
            raise DecodeFailure("an integer result too large to write")
        return value
    raise DecodeFailure(f"an expression BFCL evaluates with eval ({type(node).__name__})")


def _size(value: Any, budget: int) -> int:
    """Elements (or characters) `value` holds, counting shared parts each time; stops past `budget`."""
    total, stack = 0, [value]
    while stack:
        v = stack.pop()
        total += len(v) if isinstance(v, (str, bytes)) else 1
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        if total > budget:
            break
    return total


def _check_bounds(op: ast.operator, left: Any, right: Any) -> None:
    """Refuse, before computing, results too large to write or to hold."""
    ints = isinstance(left, int) and isinstance(right, int)
    if isinstance(op, ast.Pow) and ints and right > 0 and abs(left) > 1 \
            and right * math.log10(abs(left)) > MAX_DIGITS + 1:
        raise DecodeFailure("a power too large to write")
    if isinstance(op, ast.LShift) and isinstance(right, int) and right > 4 * MAX_DIGITS:
        raise DecodeFailure("a shift too large to write")
    if isinstance(op, ast.Mult):
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, _SEQUENCE) and isinstance(times, int) and times > 0 \
                    and _size(seq, MAX_BLOCK_CHARS) * times > MAX_BLOCK_CHARS:
                raise DecodeFailure("a repetition too large to hold")
    if isinstance(op, ast.Mod) and isinstance(left, (str, bytes)):
        spec = left if isinstance(left, str) else left.decode("latin-1")
        if any(c.isdigit() or c == "*" for c in spec):  # a width or precision could be any size
            raise DecodeFailure("text formatting with a width or precision")


def _render(value: Any) -> str:
    """BFCL's `parse_nested_value`."""
    if isinstance(value, dict):
        if all(isinstance(v, dict) for v in value.values()):
            name = list(value.keys())[0]  # an empty dict fails here, as in BFCL
            return f"{name}(" + ", ".join(f"{k}={_render(v)}" for k, v in value[name].items()) + ")"
        return "{" + ", ".join(f"'{k}': {_render(v)}" for k, v in value.items()) + "}"
    return repr(value)
