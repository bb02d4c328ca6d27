from tooltune.matching import calls_match, canonical_value, matched_pairs, names_match, values_equal
from tooltune.schema import ToolCall

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
