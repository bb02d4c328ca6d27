"""`prefix_fails` of the two-block grammars: a prefix it calls failed is never completed into an answer
whose format passes, checked against the full-length answers of adversarial completions."""

from __future__ import annotations

import random

import pytest

from tooltune.parsing import parse_completion, prefix_fails

CALL = '[{"name": "f", "arguments": {"a": 1}}]'
COMPLETIONS = [
    f"<think>plan</think>\n<tool_call>\n{CALL}\n</tool_call>",
    f"  <think>plan</think>  <tool_call>{CALL}</tool_call>  \n",
    f"<think>plan</think>\n<tool_call>\n{CALL}\n</tool_call>\nThe user wants f.",
    f"<think>plan</think>\n<tool_call>\n{CALL}\n</tool_call>\n<think>again</think>",
    f"<think>plan</think>\n<tool_call>\n{CALL}\n</tool_call><tool_call>{CALL}</tool_call>",
    "<think>plan</think>\n<tool_call>\n[]\n</tool_call>",
    "<think>plan</think>\n<tool_call>\n[{\"name\": 1}]\n</tool_call>",
    "<think>plan</think>\n<tool_call>\nnot json\n</tool_call>\n",
    "Sure! I can help with that. The weather in Paris is sunny.",
    f"Sure <think>plan</think><tool_call>{CALL}</tool_call>",
    f"<think></think><tool_call>{CALL}</tool_call>",
    f"<think>   </think><tool_call>{CALL}</tool_call>",
    f"<think>a <tool_call> b</think><tool_call>{CALL}</tool_call>",
    f"<think>a </tool_call> b</think><tool_call>{CALL}</tool_call>",
    f"<think>plan</think> so <tool_call>{CALL}</tool_call>",
    f"<think>plan<think>more</think><tool_call>{CALL}</tool_call>",
    f"</think><think>plan</think><tool_call>{CALL}</tool_call>",
    f"<tool_call>{CALL}</tool_call>",
    f"<think>plan</think></think><tool_call>{CALL}</tool_call>",
    f"<think>plan</think>\n<tool_call>\n{CALL}",
    "<think>plan",
    "<thi",
    "\n\n",
    "",
    f"<think>plan</think><tool_call>{CALL}</tool_call><think>",
    f"text <think>plan</think> text <tool_call>{CALL}</tool_call> text",
    f"<think>plan</think><tool_call>{CALL}</tool_call> then <tool_call>{CALL}</tool_call>",
    f"<tool_call>{CALL}</tool_call><think>plan</think>",
    f"<reason>plan</reason><tool>{CALL}</tool>",
    "<reason>plan</reason><tool>None of function can be used</tool>",
    "<reason>plan</reason><tool>None of function can be used</tool> trailing",
    "<reason></reason><tool>None of function can be used</tool>",
    "<reason>plan</reason>\n<tool>[]</tool>",
]
PIECES = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<reason>", "</reason>", "<tool>",
          "</tool>", "\n", " ", "  ", "plan", CALL, "[]", "{", "}", "None of function can be used",
          "<thi", "nk>", "</tool_", "call>", "x"]


def _random_completions(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 9))) for _ in range(count)]


@pytest.mark.parametrize("grammar", ["tool_n1", "r2if"])
@pytest.mark.parametrize("mode", ["strict", "substring"])
def test_a_failed_prefix_never_completes_into_a_passing_answer(grammar: str, mode: str) -> None:
    texts = COMPLETIONS + _random_completions(2500)
    decided = 0
    for text in texts:
        full_passes = parse_completion(text, grammar, mode).calls is not None
        for end in range(len(text) + 1):
            if prefix_fails(text[:end], grammar, mode):
                decided += 1
                assert not full_passes, (grammar, mode, text, end)
                # the verdict read from the format is the same for every continuation in the corpus
                assert prefix_fails(text[: end + 1], grammar, mode) or end == len(text), (text, end)
    assert decided > 1000  # the rule does decide prefixes, not only never-wrong by silence


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        ("Sure", True),  # the untrained model's prose: nothing can start <think> any more
        ("  <th", False),
        ("<think>plan</think>\n<tool_", False),
        ("<think>plan</think>\nI will", True),
        (f"<think>plan</think>\n<tool_call>\n{CALL}\n</tool_call>\n", False),  # only whitespace after
        (f"<think>plan</think>\n<tool_call>\n{CALL}\n</tool_call>\nThe", True),
        ("<think>plan</think>\n<tool_call>\n[{\"name\": 1}]\n</tool_call>", True),  # closed, undecodable
        ("<think>plan</think>\n<tool_call>\n[{\"na", False),  # inside the block: judged when it closes
        ("<think>plan<think>", True),
        ("<think></think>", True),
    ],
)
def test_strict_tool_n1_prefixes(text: str, failed: bool) -> None:
    assert prefix_fails(text, "tool_n1", "strict") is failed


def test_substring_mode_allows_text_around_the_blocks() -> None:
    assert not prefix_fails("Sure, here it is: <think>plan</think> and", "tool_n1", "substring")
    assert prefix_fails("<think>a</think><think>", "tool_n1", "substring")
    assert prefix_fails(f"<tool_call>{CALL}</tool_call>", "tool_n1", "substring")  # call before </think>


def test_grammars_without_a_prefix_rule_never_decide() -> None:
    for grammar in ("hermes", "python", "json", "toolrl"):
        assert not prefix_fails("Sure, garbage ]]]", grammar, "strict")
    assert not prefix_fails(None, "tool_n1", "strict")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        prefix_fails("x", "tool_n1", "lenient")
