"""The render -> generate -> score loop: which completions may stop once their reward is decided."""

from __future__ import annotations

import pytest

from tooltune.generation import GenerationRequest, Sampling, score_prompts

CALL = '<think>f</think>\n<tool_call>\n[{"name": "f", "arguments": {}}]\n</tool_call>'


class Recording:
    """A backend that answers every request with `text` and keeps the requests it was asked."""

    name = "recording"

    def __init__(self, text: str) -> None:
        self.text, self.requests = text, []

    def generate(self, requests: list[GenerationRequest]) -> list[list[str]]:
        self.requests.extend(requests)
        return [[self.text] * r.n for r in requests]


@pytest.mark.parametrize(("temperature", "require_format", "template", "stops"),
                         [(0.0, True, "tool_n1", True), (0.7, True, "tool_n1", False),
                          (0.0, False, "tool_n1", False), (0.0, True, "hermes", False)])
def test_only_greedy_format_checked_completions_may_stop_early(
    temperature: float, require_format: bool, template: str, stops: bool
) -> None:
    backend = Recording(CALL)
    gold = [[{"name": "f", "arguments": {}}]]
    rewards = score_prompts(backend, [[{"role": "user", "content": "call f"}]], gold, template, 1,
                            Sampling(temperature=temperature, max_new_tokens=8),
                            require_format=require_format)
    check = backend.requests[0].stop_when
    assert (check is not None) is stops
    if check is not None:  # what it decides is a reward of 0 whatever follows
        assert check("Sure, I") and not check(CALL[:20]) and not check(CALL)
    assert rewards == [[1.0]] or template == "hermes"
    score_prompts(backend, [[{"role": "user", "content": "x"}]], [[]], template, 1,
                  Sampling(temperature=temperature, max_new_tokens=8), stop_decided=False)
    assert backend.requests[-1].stop_when is None
