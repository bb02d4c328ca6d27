"""ToolRL-style reward: R_format + (6 * R_max / S_max - 3), on ToolRL's own output format."""

import json

import pytest

from tooltune.prompts import render_answer
from tooltune.rewards import PRESETS, CompositeReward
from tooltune.rewards.toolrl import (
    ToolRLCorrectnessReward,
    ToolRLFormatReward,
    ToolRLReward,
    multiset_jaccard,
    toolrl_correctness,
)
from tooltune.schema import ToolCall

GOLD = [ToolCall("get_weather", {"city": "Paris", "days": 3})]
TWO = [ToolCall("get_weather", {"city": "Paris", "days": 3}), ToolCall("get_time", {"tz": "CET"})]


def toolrl(calls, reasoning="The user wants the forecast.", response=None, key="parameters"):
    """An answer in ToolRL's format: one JSON object per line, "parameters", optional <response>."""
    lines = "\n".join(json.dumps({"name": c.name, key: c.arguments}) for c in calls)
    text = f"<think>{reasoning}</think>\n<tool_call>\n{lines}\n</tool_call>"
    return text + (f"\n<response>{response}</response>" if response is not None else "")


def test_the_preset_scores_toolrl_answers_in_toolrl_format():
    assert PRESETS["toolrl"]["template"] == "toolrl"
    preset = CompositeReward.from_preset("toolrl")
    assert preset(toolrl(GOLD), GOLD) == {"toolrl_format": 1.0, "toolrl_correctness": 3.0, "binary": 1.0,
                                          "score": 4.0}
    assert preset(toolrl(TWO), TWO)["score"] == 4.0
    assert preset(toolrl(TWO[::-1]), TWO)["score"] == 4.0  # call order is free
    assert preset(toolrl(TWO, response="It is sunny."), TWO)["score"] == 4.0
    no_call = "<think>Nothing fits.</think>\n<response>I cannot do that.</response>"
    assert preset(no_call, [])["score"] == 4.0
    assert preset(no_call, GOLD)["score"] == -3.0  # a call was expected: no call block, -3 and no format


def test_format_is_about_the_tags_and_follows_the_ground_truth():
    r = ToolRLFormatReward()
    assert r(toolrl(GOLD), GOLD) == 1.0
    assert r(toolrl(GOLD).replace("</think>\n", "</think> "), GOLD) == 0.0  # ToolRL wants one newline
    assert r(toolrl(GOLD) + " Done.", GOLD) == 0.0
    broken = toolrl(GOLD).replace('"city"', "city")
    assert r(broken, GOLD) == 1.0  # the tags are right; the JSON is correctness' business
    assert ToolRLReward()(broken, GOLD) == 1.0 - 3.0
    # a call block exactly when calls are expected
    assert r(toolrl(GOLD), []) == 0.0
    assert r("<think>No tool.</think>\n<response>Sorry.</response>", GOLD) == 0.0
    loose = toolrl(GOLD).replace("</think>\n", "</think> ")
    assert ToolRLFormatReward(format_mode="substring")(loose, GOLD) == 1.0


def test_correctness_reads_the_block_toolrl_reads():
    r = ToolRLCorrectnessReward()
    # the first block counts, even when the format is broken by a second one
    two_blocks = toolrl(GOLD) + "\n" + toolrl([ToolCall("other", {})]).split("\n", 1)[1]
    assert r(two_blocks, GOLD) == 3.0 and ToolRLFormatReward()(two_blocks, GOLD) == 0.0
    # "arguments" instead of "parameters", a JSON list, an empty line: the block cannot be read
    assert r(toolrl(GOLD, key="arguments"), GOLD) == -3.0
    assert r(render_answer(GOLD, "tool_n1"), GOLD) == -3.0
    assert r(toolrl(TWO).replace('\n{"name": "get_time"', '\n\n{"name": "get_time"'), TWO) == -3.0
    # S_max = 1 + 1 + 2 = 4; days as a string: r_name 1, r_param 1, r_value 1 -> 6 * 3 / 4 - 3 = 1.5
    assert r(toolrl([ToolCall("get_weather", {"city": "Paris", "days": "3"})]), GOLD) == pytest.approx(1.5)


def test_regression_toolrl_answers_no_longer_score_the_minimum():
    """Under the Tool-N1 grammar a ToolRL answer scored -1 (one call) and -3 (two calls)."""
    assert ToolRLReward()(toolrl(GOLD), GOLD) == 4.0
    assert ToolRLReward()(toolrl(TWO), TWO) == 4.0
    assert ToolRLReward(template="tool_n1")(toolrl(TWO), TWO) == -3.0  # the other grammar, as before


# --- R_correct in the abstract ------------------------------------------------------------------------------


def test_multiset_jaccard():
    assert multiset_jaccard(["a", "a", "b"], ["a", "b", "b"]) == pytest.approx(2 / 4)
    assert multiset_jaccard([], []) == 1.0
    assert multiset_jaccard(["a"], []) == 0.0


def test_toolrl_correctness_worked_examples():
    gold = [ToolCall("f", {"a": 1, "b": "x"}), ToolCall("g", {})]
    # exact: +3
    assert toolrl_correctness([ToolCall("g", {}), ToolCall("f", {"b": "x", "a": 1})], gold) == 3.0
    # S_max = 1 + |G| + sum |keys| = 1 + 2 + 2 = 5.
    # pred f(a=1, b="y"), g(): r_name = 1; f pair: r_param 1 + r_value 1; g pair: r_param 1 (both empty) + 0
    # R_max = 1 + 2 + 1 = 4 -> 6 * 4 / 5 - 3 = 1.8
    assert toolrl_correctness([ToolCall("f", {"a": 1, "b": "y"}), ToolCall("g", {})], gold) == pytest.approx(
        1.8
    )
    # pred f(a="1", c=2): r_name = |{f}| / |{f, g}| = 1/2; f pair: keys {a,b} vs {a,c}: 1/3, values 0
    # R_max = 1/2 + 1/3 -> 6 * (5/6) / 5 - 3 = -2
    assert toolrl_correctness([ToolCall("f", {"a": "1", "c": 2})], gold) == pytest.approx(-2.0)
    assert toolrl_correctness(None, gold) == -3.0
    # no call expected: [] is exact (+3), any call gets r_name 0 over S_max 1 -> -3
    assert toolrl_correctness([], []) == 3.0
    assert toolrl_correctness([ToolCall("f", {})], []) == -3.0


def test_toolrl_uses_the_optimal_matching_not_the_first_one():
    gold = [ToolCall("f", {"a": 1}), ToolCall("f", {"a": 2})]
    pred = [ToolCall("f", {"a": 2}), ToolCall("f", {"a": 3})]
    # best assignment pairs pred a=2 with gold a=2 (1 + 1) and a=3 with a=1 (1 + 0): total 3
    # S_max = 1 + 2 + 2 = 5; r_name = 1 -> 6 * 4 / 5 - 3 = 1.8
    assert toolrl_correctness(pred, gold) == pytest.approx(1.8)
    # one call of a name on either side: the best pair, no assignment solver needed
    mixed = [ToolCall("f", {"a": 3}), ToolCall("f", {"a": 1}), ToolCall("g", {})]
    assert toolrl_correctness(mixed, [ToolCall("f", {"a": 1}), ToolCall("g", {})]) == pytest.approx(
        6 * (2 / 3 + 2 + 1) / 4 - 3  # r_name 2/3, f pair 1 + 1, g pair 1 + 0
    )


def test_toolrl_total_under_the_tool_n1_grammar():
    r = ToolRLReward(template="tool_n1")
    good = render_answer(GOLD, "tool_n1", reasoning="Paris forecast.")
    assert r(good, GOLD) == 4.0
    # format broken but calls readable: 0 + 3
    assert r(good + "\nDone!", GOLD) == 3.0
    # no call block at all: 0 - 3
    assert r("I think it is sunny.", GOLD) == -3.0
