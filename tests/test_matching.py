import itertools

import pytest

from tooltune.matching import (
    call_differences,
    call_key,
    calls_match,
    canonical_value,
    exact_match,
    matched_pairs,
    names_match,
    parsed_match,
    values_equal,
)
from tooltune.models import CHAT_TEMPLATE
from tooltune.parsing import parse_calls, parse_completion
from tooltune.prompts import grammar_for, render_answer, resolve_native
from tooltune.rewards.binary import BinaryReward
from tooltune.schema import ToolCall

NATIVE = resolve_native(CHAT_TEMPLATE)
"""``native`` as the tiny model answers in it."""

A = ToolCall("f", {"x": 1, "y": "a"})
B = ToolCall("g", {"z": [1, 2]})


def test_exact_match_is_order_free_for_calls_and_arguments():
    assert calls_match([B, A], [A, B])
    assert calls_match([ToolCall("f", {"y": "a", "x": 1})], [A])


def test_exact_match_is_typed():
    assert not values_equal("5", 5)
    assert not values_equal(5, 5.0)
    assert not values_equal(True, 1)
    assert not values_equal(None, "null")
    assert not calls_match([ToolCall("f", {"x": 1.0, "y": "a"})], [A])
    assert not calls_match([ToolCall("f", {"x": True, "y": "a"})], [A])
    assert values_equal({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]})
    assert not values_equal([1, 2], [2, 1])  # list values are ordered data


def test_missing_extra_duplicate_calls_and_arguments():
    assert not calls_match([A], [A, B])
    assert not calls_match([A, A, B], [A, B])  # an extra duplicate call
    assert not calls_match([ToolCall("f", {"x": 1})], [A])  # missing argument
    assert not calls_match([ToolCall("f", {"x": 1, "y": "a", "z": 0})], [A])  # extra argument
    assert not calls_match(None, [])
    assert calls_match([], [])
    assert calls_match([A, A], [A, A])
    assert not calls_match([A, B], [A, A])


def test_names_match_and_matched_pairs():
    assert names_match([ToolCall("f", {}), B], [A, B])
    assert not names_match([A], [A, A])
    assert not names_match(None, [])
    pairs = matched_pairs([A, ToolCall("f", {}), B], [B, A, A])
    assert pairs == [(A, A), (B, B)]


def test_canonical_value_falls_back_for_mixed_keys():
    assert canonical_value({1: "a", "b": 2}) == canonical_value({"b": 2, 1: "a"})
    assert canonical_value({1: "a", "b": 2}) != canonical_value({1: "b", "b": 2})


def test_call_differences_are_empty_exactly_when_the_calls_match():
    variants = [A, B, ToolCall("f", {"x": 1.0, "y": "a"}), ToolCall("f", {"y": "a", "x": 1})]
    lists = [list(c) for n in range(4) for c in itertools.product(variants, repeat=n)]
    for pred, gold in itertools.product(lists[:30], lists[:30]):
        missing, extra = call_differences(pred, gold)
        assert (not missing and not extra) == calls_match(pred, gold), (pred, gold)
        # what is missing comes from gold and what is extra from pred, each once
        assert len(gold) - len(missing) == len(pred) - len(extra)
    assert call_differences([A, A, B], [B, A]) == ([], [A])
    assert call_differences([ToolCall("f", {"x": 1.0, "y": "a"})], [A]) == (
        [A], [ToolCall("f", {"x": 1.0, "y": "a"})])


def test_call_key_is_typed_and_order_free():
    assert call_key(ToolCall("f", {"y": "a", "x": 1})) == call_key(A)
    assert call_key(ToolCall("f", {"x": 1.0, "y": "a"})) != call_key(A)
    assert call_key(ToolCall("f", {"x": "1", "y": "a"})) != call_key(A)


GOLD = [ToolCall("get_weather", {"city": "Paris"})]
TEXTS = [
    render_answer(GOLD, "tool_n1", reasoning="Paris."),
    render_answer(GOLD, "tool_n1", include_reasoning=False),
    render_answer([ToolCall("get_weather", {"city": "Rome"})], "tool_n1"),
    "<think>a</think><think>b</think>\n<tool_call>[{\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Paris\"}}]</tool_call>",
    render_answer(GOLD, "tool_n1") + " trailing",
    render_answer(GOLD, "r2if"),
    render_answer([], "r2if"),
    render_answer(GOLD, "toolrl"),
    render_answer(GOLD, "bfcl"),
    render_answer(GOLD, NATIVE),
    "",
    "no calls at all",
]


@pytest.mark.parametrize("template", ["tool_n1", "r2if", "toolrl", "bfcl", NATIVE], ids=str)
@pytest.mark.parametrize("mode", ["strict", "substring"])
@pytest.mark.parametrize("require_format", [True, False])
def test_the_binary_reward_and_evaluation_give_one_verdict(template, mode, require_format):
    """Training's `BinaryReward` (a parse shared with other components) and evaluation's `exact_match`
    decide the same thing on every completion."""
    grammar = grammar_for(template)
    reward = BinaryReward(template, mode, require_format)
    for text in TEXTS:
        verdict = exact_match(text, GOLD, grammar, mode, require_format)
        assert reward(text, GOLD) == verdict, text
        parsed = parse_completion(text, grammar, mode) if require_format else parse_calls(text, grammar)
        assert parsed_match(parsed, GOLD, require_format) == verdict
        assert parsed_match(parsed, lambda: GOLD, require_format) == verdict
    assert exact_match(TEXTS[0], GOLD) == 1.0 and exact_match(TEXTS[2], GOLD) == 0.0
    assert exact_match(TEXTS[3], GOLD, "tool_n1", "strict") == 0.0  # a repeated <think> fails the format
    assert exact_match(TEXTS[3], GOLD, "tool_n1", "strict", require_format=False) == 1.0
