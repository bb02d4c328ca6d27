"""ACEBench's decoding of a model's text, rule for rule, without `eval`.

Read from ACEBench/ACEBench (commit e6db74b735ead22c24f27367606a9408573b848f):

- Normal and special answers (`eval_main.py` → `model_inference/utils.py: decode_ast` → `ast_parse`):
  every whitespace character of the raw text is removed (`"".join(text.split())`, so `'New York'`
  becomes `'NewYork'`), the rest is parsed as one Python expression whose body must be a list, tuple
  or set (`parsed.body.elts`) of calls (`assert isinstance(elem, ast.Call)`). Anything else, a code
  fence or a single call without the surrounding `[...]` included, is a decode failure; two calls
  without brackets parse as a tuple and pass. The decoded form is `[{name: {arg: value}}]`.
- Agent steps (`model_inference/multi_step/execution_role_step.py` and `multi_turn/common_agent.py:
  decode_function_list`): one leading space is dropped, a missing `[` is prepended and a missing `]`
  appended (the closing-bracket repair), then the characters `[`, `]` and `'` are stripped from both
  ends and the rest parsed: one call, or a list/tuple of calls. No whitespace is removed. In
  multi_turn a reply goes to the executor only when it contains `[...]` on one line and decodes with
  every element a call; in multi_step every reply goes to the executor.

Values (`resolve_ast_by_type`): constants as they are (`...` as the string "..."); a unary operator
on a constant negates it, whatever the operator (ACEBench computes `-operand.value`); lists, dicts
and tuples element by element; a bare name as its identifier string (`celsius` → "celsius", `true` →
"true"); a nested call as `{name: {args}}` (normal answers; agent steps keep a call without keyword
arguments as its source text); a subscript as its source text. ACEBench `eval`s arithmetic
(`BinOp`, e.g. `2023-10-15` → 1998); here `safe_arithmetic` computes it from literal numbers, strings,
lists and tuples only, with bounded results, and refuses operands that name or call anything, sets,
dicts and `%` string formatting (ACEBench would evaluate those too, Python builtins included).
Everything else (f-strings, comparisons, lambdas, sets as values, ...) fails, as in ACEBench.
Input is bounded (`MAX_BLOCK_CHARS`, nesting `MAX_DEPTH`) and no function here raises.
"""

from __future__ import annotations

import ast
import operator
import re
import warnings
from collections.abc import Callable
from typing import Any

from tooltune.parsing import Grammar, parse_completion
from tooltune.parsing.limits import MAX_BLOCK_CHARS, MAX_CALLS, MAX_DEPTH
from tooltune.parsing.python_calls import nesting_depth
from tooltune.prompts import grammar_for
from tooltune.schema import Parsed, Scoring, ToolCall

Decoded = list[dict[str, dict[Any, Any]]]
"""ACEBench's decoded form of an answer: one `{function name: {argument: value}}` per call."""

MAX_VALUE_ITEMS = 100_000
"""Longest string, list or tuple an arithmetic value may build (`'a' * 10**9` is refused)."""
MAX_INT_BITS = 10_000
"""Largest integer (in bits) an arithmetic value may build (`10 ** 10 ** 10` is refused)."""
_ROUTE_TO_EXECUTOR = re.compile(r"\[.*\]")


class _Refused(Exception):
    """A value ACEBench would decode differently or not at all; the answer fails to decode."""


def strip_whitespace(text: str) -> str:
    """ACEBench's first step on a normal answer: every whitespace character removed."""
    return "".join(text.split())


def decode_answer(text: Any) -> tuple[Decoded | None, str | None]:
    """A normal answer's decoded form as ACEBench gets it, or (None, why) where ACEBench's decoding
    raises (the entry then fails with "Invalid syntax. Failed to decode AST")."""
    if not isinstance(text, str):
        return None, "not text"
    if len(text) > MAX_BLOCK_CHARS:
        return None, f"longer than {MAX_BLOCK_CHARS} characters"
    try:
        body = _parse(strip_whitespace(text))
        if not isinstance(body, (ast.List, ast.Tuple, ast.Set)):
            return None, "not a list of calls (ACEBench reads `parsed.body.elts`)"
        if len(body.elts) > MAX_CALLS:
            return None, f"more than {MAX_CALLS} calls"
        out = []
        for elem in body.elts:
            if not isinstance(elem, ast.Call):
                return None, "an element of the list is not a call"
            out.append(_call(elem, 0, nested_calls_as_text=False))
        return out, None
    except Exception as e:  # ACEBench: any exception of its decoding fails the entry
        return None, f"{type(e).__name__}: {str(e)[:200]}"


def decode_agent_step(text: Any, multi_turn: bool = False) -> list[ToolCall] | None:
    """The calls ACEBench's executor runs for one agent reply, or None where it runs none.

    multi_step (`multi_turn=False`): None where the decoding raises (ACEBench answers "Please do not ask
    me any questions, ..."); a reply missing its closing bracket is repaired. multi_turn: None also
    where the reply has no `[...]` on one line or a list element is not a call (the reply then goes to
    the user). `[]` where the text decodes to something that holds no call (ACEBench executes
    nothing). Tuples become lists and a `**kwargs` entry becomes the argument "None"."""
    if not isinstance(text, str) or not text or len(text) > MAX_BLOCK_CHARS:
        return None
    if multi_turn and not _ROUTE_TO_EXECUTOR.search(text):
        return None
    func = text[1:] if text[0] == " " else text
    if not func.startswith("["):
        func = "[" + func
    if not func.endswith("]"):
        func = func + "]"
    try:
        body = _parse(func.strip("[]'"))
        if isinstance(body, ast.Call):
            elems = [body]
        elif isinstance(body, (ast.Tuple, ast.List)):
            elems = body.elts
            if not all(isinstance(e, ast.Call) for e in elems):
                return None  # multi_step raises ValueError; multi_turn's router returns False
        else:
            return []
        if len(elems) > MAX_CALLS:
            return None
        calls = [_call(e, 0, nested_calls_as_text=True) for e in elems]
    except Exception:  # ACEBench: the executor answers the reply as a non-call
        return None
    return [ToolCall(name, {str(k): _json_like(v) for k, v in args.items()})
            for call in calls for name, args in call.items()]


def parse_agent_step(text: Any, template: str | Grammar, mode: str = "strict", multi_turn: bool = False,
                     scoring: Scoring = Scoring.OFFICIAL) -> Parsed:
    """One agent reply's calls. Under the `python` grammar (ACEBench's format) ACEBench's executor
    decoding (`decode_agent_step`, closing-bracket repair included) in both scoring modes: no corrected
    rule changes it. Other templates: their grammar's `parse_completion` under `mode`."""
    Scoring.of(scoring)
    grammar = grammar_for(template)
    if grammar.name != "python":
        return parse_completion(text, grammar, mode)
    calls = decode_agent_step(text, multi_turn)
    why = None if calls is not None else "not decoded by ACEBench's executor"
    return Parsed(None, calls, calls is not None, why)


def _parse(source: str) -> ast.expr:
    if nesting_depth(source, MAX_DEPTH) > MAX_DEPTH:
        raise _Refused(f"nesting deeper than {MAX_DEPTH}")
    with warnings.catch_warnings():  # the text is the model's: no warnings about `1[0]` or `'\\d'`
        warnings.simplefilter("ignore")
        return ast.parse(source, mode="eval").body


def _func_name(node: ast.Call) -> str:
    """ACEBench's name of a call: the attribute chain down to a name, joined by dots."""
    parts = []
    f = node.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name):
        parts.append(f.id)
    return ".".join(reversed(parts))


def _call(node: ast.Call, depth: int, nested_calls_as_text: bool) -> dict[str, dict[Any, Any]]:
    """`{name: {keyword: value}}`; positional arguments are dropped, as in ACEBench."""
    args: dict[Any, Any] = {}
    for kw in node.keywords:
        args[kw.arg] = _value(kw.value, depth + 1, nested_calls_as_text)
    return {_func_name(node): args}


def _value(node: ast.AST, depth: int, nested_calls_as_text: bool) -> Any:
    if depth > MAX_DEPTH:
        raise _Refused(f"nesting deeper than {MAX_DEPTH}")
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.operand, ast.Constant):
            raise _Refused("a unary operator on something other than a constant")
        return -node.operand.value  # ACEBench negates whatever the operator; `-'x'` raises, as there
    if isinstance(node, ast.List):
        return [_value(v, depth + 1, nested_calls_as_text) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v, depth + 1, nested_calls_as_text) for v in node.elts)
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise _Refused("a `**` entry in a dict")
            out[_value(k, depth + 1, nested_calls_as_text)] = _value(v, depth + 1, nested_calls_as_text)
        return out
    if isinstance(node, ast.BinOp):
        return safe_arithmetic(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        if nested_calls_as_text and not node.keywords:
            return ast.unparse(node)
        if not node.keywords:
            return {_func_name(node): {}}
        return _call(node, depth, nested_calls_as_text)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise _Refused(f"unsupported value {type(node).__name__}")


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.BitAnd: operator.and_,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert, ast.Not: operator.not_,
}


def safe_arithmetic(node: ast.AST, depth: int = 0) -> Any:
    """The value Python gives an arithmetic expression over literals (what ACEBench's `eval` gives),
    computed operator by operator; names, calls and oversized results are refused."""
    if depth > MAX_DEPTH:
        raise _Refused(f"nesting deeper than {MAX_DEPTH}")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](safe_arithmetic(node.operand, depth + 1))
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [safe_arithmetic(v, depth + 1) for v in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = safe_arithmetic(node.left, depth + 1), safe_arithmetic(node.right, depth + 1)
        _check_size(type(node.op), left, right)
        return _bounded(_BINOPS[type(node.op)](left, right))
    raise _Refused(f"arithmetic on {type(node).__name__} is not computed (ACEBench would eval it)")


def _check_size(op: type, left: Any, right: Any) -> None:
    """Refuse, before computing, the operations whose result could exceed the bounds."""
    ints = all(isinstance(x, int) for x in (left, right))
    big = ints and abs(left) > 1 and right > 0
    if op is ast.Pow and big and abs(left).bit_length() * right > MAX_INT_BITS:
        raise _Refused("power too large")
    if op is ast.LShift and ints and right > MAX_INT_BITS:
        raise _Refused("shift too large")
    if op is ast.Mod and isinstance(left, (str, bytes)):
        raise _Refused("string formatting")
    if op is ast.Mult:
        for seq, n in ((left, right), (right, left)):
            sized = isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int)
            if sized and len(seq) * n > MAX_VALUE_ITEMS:
                raise _Refused("repetition too long")


def _bounded(v: Any) -> Any:
    if isinstance(v, int) and v.bit_length() > MAX_INT_BITS:
        raise _Refused("integer too large")
    if isinstance(v, (str, bytes, list, tuple)) and len(v) > MAX_VALUE_ITEMS:
        raise _Refused("value too long")
    return v


def _json_like(v: Any) -> Any:
    """Tuples as lists, dict keys as text: the argument values an executed `ToolCall` carries."""
    if isinstance(v, (list, tuple)):
        return [_json_like(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_like(x) for k, x in v.items()}
    return v
