"""Call decision: paid for calling exactly when the ground truth calls, never for an undecodable answer."""

import pytest

from tooltune.rewards import CompositeReward, get_reward
from tooltune.schema import ToolCall

GOLD = [ToolCall("get_weather", {"city": "Paris"})]
RIGHT = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
OTHER = '[{"name": "get_news", "arguments": {"topic": "Paris"}}]'
DECISION = get_reward("decision")


def n1(block: str) -> str:
    return f"<think>Decide.</think>\n<tool_call>\n{block}\n</tool_call>"


@pytest.mark.parametrize(
    ("text", "gold", "expected"),
    [
        (n1(RIGHT), GOLD, 1.0),
        (n1(OTHER), GOLD, 1.0),  # a wrong call is still a call: the other components rank it
        (n1("[]"), GOLD, 0.0),
        (n1("[]"), [], 1.0),
        (n1(OTHER), [], 0.0),
        (f"<tool_call>{RIGHT}</tool_call> and more", GOLD, 1.0),  # the calls-only read
        ('<tool_call>[{"name": "get_weather", "arguments": "{\\"city\\": 1}"}]</tool_call>', GOLD, 1.0),
        ("<think>No tool fits.</think>", [], 0.0),  # abstaining still needs the explicit []
        (n1("[broken"), [], 0.0),
        ("", GOLD, 0.0),
    ],
)
def test_decision_scores(text, gold, expected):
    assert DECISION(text, gold) == expected


def test_hostile_input_scores_zero():
    assert DECISION(n1("[" * 100_000), GOLD) == 0.0
    assert DECISION(None, GOLD) == 0.0
    assert DECISION({"role": "assistant", "content": n1("[]")}, []) == 1.0


def test_with_fine_grained_an_attempt_outranks_abstaining_on_a_call_prompt():
    mix = CompositeReward(components={"fine_grained": 1.0, "decision": 0.2})
    empty, wrong = mix(n1("[]"), GOLD)["score"], mix(n1(OTHER), GOLD)["score"]
    fine = get_reward("fine_grained")
    assert fine(n1("[]"), GOLD) == fine(n1(OTHER), GOLD)  # what the term is for
    assert wrong > empty
    assert mix(n1("[]"), [])["score"] > mix(n1(OTHER), [])["score"]
    assert mix(n1(RIGHT), GOLD)["score"] == pytest.approx(1.2)
