"""Tool-N1 binary reward (Eq. 4), its fine-grained ablation (Table 3) and the ToolRL-style reward."""

import json

import pytest

from tooltune.parsing import R2IF_REJECTION
from tooltune.prompts import render_answer
from tooltune.rewards import binary_reward, get_reward
from tooltune.rewards.fine_grained import FineGrainedReward
from tooltune.rewards.toolrl import ToolRLReward, multiset_jaccard, toolrl_correctness
from tooltune.schema import ToolCall

GOLD = [ToolCall("get_weather", {"city": "Paris", "days": 3})]
GOLD_DICTS = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]


def n1(block: str, reasoning: str = "The user wants the Paris forecast.") -> str:
    return f"<think>{reasoning}</think>\n<tool_call>\n{block}\n</tool_call>"


GOOD = n1('[{"name": "get_weather", "arguments": {"days": 3, "city": "Paris"}}]')


@pytest.mark.parametrize("answer", [GOLD, GOLD_DICTS, json.dumps(GOLD_DICTS), GOLD_DICTS[0]])
def test_correct_answer_scores_one_whatever_the_answer_form(answer):
    assert binary_reward(GOOD, answer) == 1.0


def test_conversational_completion_is_read():
    assert binary_reward([{"role": "assistant", "content": GOOD}], GOLD) == 1.0


def test_call_and_key_order_are_free():
    gold = [ToolCall("a", {"x": 1}), ToolCall("b", {"y": [1, 2]})]
    text = n1('[{"name": "b", "arguments": {"y": [1, 2]}}, {"name": "a", "arguments": {"x": 1}}]')
    assert binary_reward(text, gold) == 1.0


@pytest.mark.parametrize(
    "block",
    [
        '[{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}]',  # string for a number
        '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3.0}}]',  # float for an int
        '[{"name": "get_weather", "arguments": {"city": "Paris"}}]',  # missing argument
        '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "x": 1}}]',  # extra argument
        '[{"name": "get_forecast", "arguments": {"city": "Paris", "days": 3}}]',  # wrong function
        '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},'
        ' {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]',  # extra duplicate call
        "[]",  # no call
    ],
)
def test_wrong_calls_score_zero(block):
    assert binary_reward(n1(block), GOLD) == 0.0


def test_booleans_are_not_integers():
    gold = [ToolCall("f", {"flag": True})]
    assert binary_reward(n1('[{"name": "f", "arguments": {"flag": true}}]'), gold) == 1.0
    assert binary_reward(n1('[{"name": "f", "arguments": {"flag": 1}}]'), gold) == 0.0


def test_empty_list_is_correct_exactly_when_no_call_is_expected():
    assert binary_reward(n1("[]", "No tool fits."), []) == 1.0
    assert binary_reward(n1("[]", "No tool fits."), "[]") == 1.0
    assert binary_reward(GOOD, []) == 0.0


HACKS = {
    "repeated think": "<think>a</think><think>b</think>\n<tool_call>\n" + GOOD.split("<tool_call>\n")[1],
    "nested think": "<think>a <think>b</think> c</think>\n<tool_call>\n" + GOOD.split("<tool_call>\n")[1],
    "call inside reasoning": n1(
        '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]',
        'plan: <tool_call>[{"name": "get_weather", "arguments": {}}]</tool_call>',
    ),
    "text after call block": GOOD + "\nDone! Anything else?",
    "text before think": "Sure.\n" + GOOD,
    "empty reasoning": n1('[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]', "   "),
    "two call blocks": GOOD + "\n<tool_call>\n[]\n</tool_call>",
    "missing think": GOOD.split("</think>\n")[1],
    "call block before think": GOOD.split("</think>\n")[1] + "\n<think>r</think>",
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_known_hacks_score_zero_under_strict(name):
    assert binary_reward(HACKS[name], GOLD) == 0.0


def test_substring_mode_reproduces_the_original_lenient_scorer():
    # the original scorer accepts trailing text and repeated tags; strict does not
    for name in ("text after call block", "repeated think", "text before think"):
        assert binary_reward(HACKS[name], GOLD, format_mode="substring") == 1.0
    assert binary_reward(HACKS["missing think"], GOLD, format_mode="substring") == 0.0


def test_require_format_false_scores_correctness_only():
    assert binary_reward(HACKS["missing think"], GOLD, require_format=False) == 1.0
    assert binary_reward(HACKS["text after call block"], GOLD, require_format=False) == 1.0
    assert (
        binary_reward(
            n1('[{"name": "get_weather", "arguments": {"city": "Rome", "days": 3}}]'),
            GOLD,
            require_format=False,
        )
        == 0.0
    )


def test_r2if_template_and_rejection_rule():
    good = render_answer(GOLD, "r2if")
    assert binary_reward(good, GOLD, template="r2if") == 1.0
    reject = f"<reason>Step1: nothing fits.</reason><tool>{R2IF_REJECTION}</tool>"
    assert binary_reward(reject, [], template="r2if") == 1.0
    assert binary_reward(reject, GOLD, template="r2if") == 0.0
    assert binary_reward(good + " thanks", GOLD, template="r2if") == 0.0
    assert (
        binary_reward("<reason>r</reason><tool>[]</tool>", [], template="r2if") == 0.0
    )  # must reject in words


def test_malformed_ground_truth_scores_zero_instead_of_raising():
    assert binary_reward(GOOD, "{not json") == 0.0
    assert binary_reward(GOOD, 42) == 0.0


def test_registry_binary_matches_function():
    r = get_reward("binary", template="tool_n1")
    assert r(GOOD, GOLD) == 1.0 and r(HACKS["empty reasoning"], GOLD) == 0.0
    assert get_reward("correctness")(HACKS["missing think"], GOLD) == 1.0
    with pytest.raises(ValueError, match="takes no parameter"):
        get_reward("binary", tau=0.3)
    with pytest.raises(ValueError, match="unknown reward"):
        get_reward("nope")


# --- fine-grained (Tool-N1 Table 3): 1 if right, else 0.2 * format + 0.2 * names ----------------------------


def test_fine_grained_worked_examples():
    r = FineGrainedReward()
    assert r(GOOD, GOLD) == 1.0
    wrong_value = n1('[{"name": "get_weather", "arguments": {"city": "Rome", "days": 3}}]')
    assert r(wrong_value, GOLD) == pytest.approx(0.2 + 0.2)  # format ok, names match
    wrong_name = n1('[{"name": "get_news", "arguments": {"city": "Paris", "days": 3}}]')
    assert r(wrong_name, GOLD) == pytest.approx(0.2)  # format ok only
    assert r(HACKS["text after call block"], GOLD) == pytest.approx(0.2)  # names only (format broken)
    assert r("garbage", GOLD) == 0.0
    custom = FineGrainedReward(format_weight=0.1, name_weight=0.5)
    assert custom(wrong_value, GOLD) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        FineGrainedReward(format_weight=0.7, name_weight=0.7)


# --- ToolRL: R_format + (6 * R_max / S_max - 3) -------------------------------------------------------


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


def test_toolrl_total_adds_the_format_term():
    r = ToolRLReward()
    assert r(GOOD, GOLD) == 4.0
    # format broken but calls readable: 0 + 3
    assert r(HACKS["text after call block"], GOLD) == 3.0
    # no call block at all: 0 - 3
    assert r("I think it is sunny.", GOLD) == -3.0
    # S_max = 1 + 1 + 2 = 4; pred get_weather(city="Paris", days="3"): r_name 1, r_param 1, r_value 1
    # -> 6 * 3 / 4 - 3 = 1.5, plus format 1
    text = n1('[{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}]')
    assert r(text, GOLD) == pytest.approx(2.5)
