"""Tool-N1 fine-grained reward: the paper's partial credits, the authors' code where it is silent."""

import json

import pytest

from tooltune.rewards import CompositeReward, get_reward
from tooltune.rewards.fine_grained import FineGrainedReward
from tooltune.schema import ToolCall

GOLD = [ToolCall("get_weather", {"city": "Paris", "days": 3})]
RIGHT = '[{"name": "get_weather", "arguments": {"days": 3, "city": "Paris"}}]'
ROME = '[{"name": "get_weather", "arguments": {"city": "Rome", "days": 3}}]'


def n1(block: str, reasoning: str = "The user wants the Paris forecast.") -> str:
    return f"<think>{reasoning}</think>\n<tool_call>\n{block}\n</tool_call>"


STRICT, SUBSTRING = FineGrainedReward(), FineGrainedReward(format_mode="substring")

# (completion, strict score, substring score); the authors' code gives the substring column except
# where noted
CASES = {
    "right": (n1(RIGHT), 1.0, 1.0),
    "wrong value": (n1(ROME), 0.4, 0.4),
    "wrong function": (n1(RIGHT.replace("get_weather", "get_news")), 0.2, 0.2),
    "no call block": ("<think>It is sunny.</think>", 0.2, 0.2),
    "garbage": ("garbage", 0.0, 0.0),
    # the cases the paper leaves open, as the authors' code scores them
    "right calls, no reasoning block": (f"<tool_call>{RIGHT}</tool_call>", 0.8, 0.8),
    "right calls, unclosed reasoning": (f"<think>Paris. <tool_call>{RIGHT}</tool_call>", 0.8, 0.8),
    "broken JSON after a right reasoning block": (n1(RIGHT[:-1]), 0.2, 0.2),
    "wrong value, no reasoning block": (f"<tool_call>{ROME}</tool_call>", 0.2, 0.2),
    # names of calls whose arguments cannot be compared still count (the authors' code)
    "arguments as a JSON string": (
        n1(json.dumps([{"name": "get_weather", "arguments": json.dumps({"city": "Paris", "days": 3})}])),
        0.4,
        0.4,
    ),
    # strict: what the original lets through never earns the full score
    "text after the block": (n1(RIGHT) + "\nAnything else?", 0.4, 1.0),
    "text before the reasoning": ("Sure. " + n1(RIGHT), 0.8, 1.0),
    "two call blocks, the last right": (n1("[]") + f"\n<tool_call>{RIGHT}</tool_call>", 0.4, 1.0),
    "empty reasoning": (n1(RIGHT, " "), 0.8, 1.0),
    # one reasoning block before the call, in both modes (the authors' v4 checks only that the tags appear)
    "repeated reasoning block": ("<think>a</think>" + n1(RIGHT), 0.8, 0.8),
    "reasoning after the call": (f"<tool_call>{RIGHT}</tool_call><think>r</think>", 0.2, 0.8),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fine_grained_scores(name):
    text, strict, substring = CASES[name]
    assert STRICT(text, GOLD) == pytest.approx(strict)
    assert SUBSTRING(text, GOLD) == pytest.approx(substring)


def test_weights_and_their_bounds():
    custom = FineGrainedReward(format_weight=0.1, name_weight=0.5)
    assert custom(n1(ROME), GOLD) == pytest.approx(0.6)
    assert custom(f"<tool_call>{RIGHT}</tool_call>", GOLD) == pytest.approx(0.9)  # 1 - format_weight
    assert custom(n1(RIGHT), GOLD) == 1.0
    with pytest.raises(ValueError):
        FineGrainedReward(format_weight=0.7, name_weight=0.7)
    with pytest.raises(ValueError):
        FineGrainedReward(format_weight=-0.1)


def test_empty_ground_truth_and_other_grammars():
    assert STRICT(n1("[]", "No tool fits."), []) == 1.0
    assert STRICT(n1(RIGHT), []) == pytest.approx(0.2)
    r2if = get_reward("fine_grained", template="r2if")
    assert r2if("<reason>Paris.</reason><tool>" + RIGHT + "</tool>", GOLD) == 1.0
    assert r2if("<tool>" + RIGHT + "</tool>", GOLD) == pytest.approx(0.8)
    python = get_reward("fine_grained", template="python")  # no reasoning half: the format is the whole
    assert python("[get_weather(city='Paris', days=3)]", GOLD) == 1.0
    assert python("[get_weather(city='Rome', days=3)]", GOLD) == pytest.approx(0.4)


def test_preset_reports_fine_grained_next_to_binary():
    c = CompositeReward.from_preset("tool_n1_fine_grained")
    assert c(f"<tool_call>{RIGHT}</tool_call>", GOLD) == pytest.approx(
        {"fine_grained": 0.8, "binary": 0.0, "format": 0.0, "score": 0.8}
    )
