"""Call comparison shared by rewards and evaluation, so training signal and benchmark cannot drift.

Exact match (Tool-N1, arXiv 2505.00024, Eq. 4 correctness term): the predicted calls equal the
ground truth as a multiset. Call order and argument order are free; every argument key and value
must be equal, with JSON types significant: ``"5" != 5``, ``5 != 5.0``, ``true != 1``; no missing or
extra argument and no missing or extra call. Name-level match compares only the multiset of names.

`exact_match` is the whole verdict on a completion (format under a grammar, then the calls);
`parsed_match` is the same verdict on a completion already parsed (the binary reward parses once for
all the components of a composite). The binary reward, the held-out evaluations, the difficulty
filter and the environments' state comparison (`call_differences`) all use this module.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tooltune.parsing import Grammar, parse_calls, parse_completion
from tooltune.schema import Parsed, ToolCall

# one encoder reused (json.dumps with keyword arguments builds a new encoder on every call); its text is
# json.dumps(value, sort_keys=True)'s, so `tooltune.environments` call texts read as plain JSON
_ENCODE = json.JSONEncoder(sort_keys=True).encode


def canonical_value(value: Any) -> str:
    """A typed, order-free, hashable text form of a JSON value.

    ``json.dumps`` already separates the types that Python's ``==`` conflates (``5``/``5.0``/``True``
    print as ``5``/``5.0``/``true``) and sorts object keys; lists stay ordered because an argument's
    list value is ordered data.
    """
    try:
        return _ENCODE(value)
    except (TypeError, ValueError):  # mixed-type dict keys from Python-literal parsing
        return _canonical_fallback(value)


def _canonical_fallback(value: Any) -> str:
    if isinstance(value, dict):
        items = sorted((repr(k), _canonical_fallback(v)) for k, v in value.items())
        return "{" + ",".join(f"{k}:{v}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_canonical_fallback(v) for v in value) + "]"
    return f"{type(value).__name__}:{value!r}"


def call_key(call: ToolCall) -> tuple[str, str]:
    """The identity of a call for multiset comparison: (name, canonical arguments)."""
    return call.name, canonical_value(call.arguments)


def calls_match(pred: Sequence[ToolCall] | None, gold: Sequence[ToolCall]) -> bool:
    """Exact multiset equality of calls (Tool-N1). `pred=None` (undecodable) never matches."""
    if pred is None or len(pred) != len(gold):
        return False
    if len(gold) == 1:  # the common case: skip building counters
        return pred[0].name == gold[0].name and call_key(pred[0]) == call_key(gold[0])
    return Counter(map(call_key, pred)) == Counter(map(call_key, gold))


def call_differences(
    pred: Iterable[ToolCall], gold: Iterable[ToolCall]
) -> tuple[list[ToolCall], list[ToolCall]]:
    """(gold calls that no predicted call matches, predicted calls that match no gold call), each call
    used at most once: both empty exactly when `calls_match(pred, gold)`. Order follows the inputs."""
    gold = list(gold)
    pool: dict[tuple[str, str], list[int]] = {}
    for i, g in enumerate(gold):
        pool.setdefault(call_key(g), []).append(i)
    matched: set[int] = set()
    extra = []
    for p in pred:
        bucket = pool.get(call_key(p))
        if bucket:
            matched.add(bucket.pop(0))
        else:
            extra.append(p)
    return [g for i, g in enumerate(gold) if i not in matched], extra


def names_match(pred: Sequence[ToolCall] | None, gold: Sequence[ToolCall]) -> bool:
    """Same multiset of function names (Tool-N1 fine-grained ablation term)."""
    if pred is None:
        return False
    return Counter(c.name for c in pred) == Counter(c.name for c in gold)


def matched_pairs(pred: Iterable[ToolCall], gold: Iterable[ToolCall]) -> list[tuple[ToolCall, ToolCall]]:
    """Pairs (predicted, gold) of calls that match exactly, each call used at most once."""
    pool: dict[tuple[str, str], list[ToolCall]] = {}
    for g in gold:
        pool.setdefault(call_key(g), []).append(g)
    pairs = []
    for p in pred:
        bucket = pool.get(call_key(p))
        if bucket:
            pairs.append((p, bucket.pop()))
    return pairs


def values_equal(a: Any, b: Any) -> bool:
    """Typed equality of two JSON values (``5 != 5.0``, ``True != 1``)."""
    return canonical_value(a) == canonical_value(b)


def exact_match(
    text: Any,
    gold: Sequence[ToolCall] | Callable[[], Sequence[ToolCall]],
    grammar: str | Grammar = "tool_n1",
    mode: str = "strict",
    require_format: bool = True,
) -> float:
    """Tool-N1's binary verdict (arXiv 2505.00024, Eq. 4): 1.0 when the format is right under `grammar`
    and `mode` and the calls equal `gold`, else 0.0. With `require_format=False` only the calls count,
    read leniently (the last call block, whatever surrounds it). Never raises on `text`.

    `gold` may be a function returning the calls: it is called only when a call list was decoded, so a
    malformed completion (most of them early in training) costs no ground-truth decoding."""
    parsed = parse_completion(text, grammar, mode) if require_format else parse_calls(text, grammar)
    return parsed_match(parsed, gold, require_format)


def parsed_match(
    parsed: Parsed,
    gold: Sequence[ToolCall] | Callable[[], Sequence[ToolCall]],
    require_format: bool = True,
) -> float:
    """`exact_match`'s verdict on a parse: 1.0 when calls were decoded, the format holds (when
    `require_format`) and the calls equal `gold`, else 0.0. `parsed` comes from
    `tooltune.parsing.parse_completion` (format required) or `parse_calls` (calls only); `gold` may be a
    function, called only when a call list was decoded."""
    if parsed.calls is None or (require_format and not parsed.format_ok):
        return 0.0
    return 1.0 if calls_match(parsed.calls, gold() if callable(gold) else gold) else 0.0
