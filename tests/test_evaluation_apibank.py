"""API-Bank scoring rule on the real level-1 / level-2 files."""

from __future__ import annotations

import pytest

from tooltune.evaluation import apibank
from tooltune.prompts import render_answer
from tooltune.schema import ToolCall


@pytest.fixture(scope="module")
def pairs(shared_data_dir):
    return apibank.load_samples(shared_data_dir / "apibank")


def test_every_expected_request_passes_and_ids_are_unique(pairs) -> None:
    assert len(pairs) == 399 + 135 and len({s.id for _, s in pairs}) == len(pairs)
    for level, s in pairs:
        assert apibank.score(s, level, render_answer(s.answer, "tool_n1"), "tool_n1").valid, s.id


def test_name_parameters_and_values_must_match(pairs) -> None:
    level, s = next((lv, s) for lv, s in pairs if s.answer[0].arguments)
    gold = s.answer[0]
    k, v = next(iter(gold.arguments.items()))
    cases = {
        "wrong_api": [ToolCall(gold.name + "X", gold.arguments)],
        "wrong_parameters": [ToolCall(gold.name, {**gold.arguments, k: str(v) + "zz"})],
        "wrong_count": [gold, gold],
    }
    for why, calls in cases.items():
        verdict = apibank.score(s, level, render_answer(calls, "tool_n1"), "tool_n1")
        assert not verdict.valid and verdict.error.startswith(why)
    missing = ToolCall(gold.name, {a: b for a, b in gold.arguments.items() if a != k})
    assert not apibank.score(s, level, render_answer([missing], "tool_n1"), "tool_n1").valid
    # API-Bank quotes every value: 5 and '5' are the same request
    assert apibank.call_matches(ToolCall("A", {"n": 5}), ToolCall("A", {"n": "5"}))
    assert apibank.score(s, level, "no call here", "tool_n1").error.startswith("decode_failed")
