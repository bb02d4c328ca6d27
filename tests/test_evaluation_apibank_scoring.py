"""API-Bank scoring on the real level-1 / level-2 files: samples and their ground truth, request reading,
error categories, the corrected rules, and hostile completions."""

from __future__ import annotations

import dataclasses
import random
import re
import shutil

import pytest

from tooltune.evaluation import apibank
from tooltune.evaluation.apibank.official_decode import (
    corrected_request,
    locate,
    official_arguments,
    official_request,
)
from tooltune.prompts import render_answer
from tooltune.schema import Scoring, ToolCall

OFFICIAL_CALL = re.compile(r"\[(\w+)\((.*)\)\]")


@pytest.fixture(scope="module")
def pairs(shared_data_dir):
    return apibank.load_samples(shared_data_dir / "apibank")


def _first(pairs, api_name):
    return next((lv, s) for lv, s in pairs if s.answer[0].name == api_name)


def test_samples_carry_their_dialogue_ground_truth(pairs) -> None:
    assert len(pairs) == 399 + 135 and len({s.id for _, s in pairs}) == len(pairs)
    for _, s in pairs:
        truth = s.meta[apibank.TRUTH_KEY]
        # the dialogue turn the official evaluator compares with is the call the sample expects
        assert truth["api_name"] == s.answer[0].name, s.id
        assert set(truth["arguments"]) == set(s.answer[0].arguments), s.id
        assert {"input", "output", "exception"} <= set(truth["result"]), s.id


def test_every_ground_truth_passes_under_corrected_scoring(pairs) -> None:
    for template in ("tool_n1", "bfcl"):
        for level, s in pairs:
            text = render_answer(s.answer, template)
            verdict = apibank.score(s, level, text, template, scoring="corrected")
            assert verdict.valid, (template, s.id, verdict.error)


def test_errors_name_the_official_categories(pairs) -> None:
    level, s = _first(pairs, "GetUserToken")
    gold = s.answer[0]
    cases = {
        "api_name_mismatch": f"[{gold.name}X(username='{gold.arguments['username']}')]",
        "invalid_input_parameter": f"[{gold.name}(username='a', password='b', extra='c')]",
        "miss_input_argument": f"[{gold.name}(username='{gold.arguments['username']}')]",
        "has_exception": f"[{gold.name}(username='nobody', password='x')]",
        "decode_failed": "I will get your token now.",
    }
    for scoring in Scoring:
        for why, text in cases.items():
            verdict = apibank.score(s, level, text, "bfcl", scoring=scoring)
            assert not verdict.valid and verdict.error.startswith(why), (scoring, why, verdict.error)
    # the template's grammar reads other templates; the tools judge the decoded call the same way
    wrong = ToolCall(gold.name, {**gold.arguments, "password": "not-it"})
    verdict = apibank.score(s, level, render_answer([wrong], "tool_n1"), "tool_n1")
    assert verdict.error.startswith("has_exception")
    assert apibank.score(s, level, "no call here", "tool_n1").error.startswith("decode_failed")
    empty = apibank.score(s, level, render_answer([], "tool_n1"), "tool_n1")
    assert not empty.valid and empty.error.startswith("no_call"), empty.error


def test_decoded_calls_read_as_the_official_reading_reads_several(pairs) -> None:
    """Two decoded calls: officially the first name with both calls' arguments (as API-Bank's regex reads
    two calls in one request); corrected refuses a request of several calls."""
    level, s = _first(pairs, "GetUserToken")
    gold = s.answer[0]
    twice = render_answer([gold, gold], "tool_n1")
    assert apibank.score(s, level, twice, "tool_n1").valid
    refused = apibank.score(s, level, twice, "tool_n1", scoring="corrected")
    assert refused.error.startswith("one_request_one_call")
    with_other = render_answer([gold, ToolCall("GetToday", {})], "tool_n1")
    assert apibank.score(s, level, with_other, "tool_n1").valid


def test_call_matches_compares_values_as_text() -> None:
    assert apibank.call_matches(ToolCall("A", {"n": 5}), ToolCall("A", {"n": "5"}))
    assert apibank.call_matches(ToolCall("A", {"n": " x "}), ToolCall("A", {"n": "x"}))
    assert not apibank.call_matches(ToolCall("A", {"n": "x"}), ToolCall("A", {"n": "y"}))
    assert not apibank.call_matches(ToolCall("A", {"n": "x"}), ToolCall("A", {"n": "x", "m": "1"}))
    assert not apibank.call_matches(ToolCall("B", {"n": "x"}), ToolCall("A", {"n": "x"}))


def test_locate_equals_the_official_regex_search() -> None:
    """The linear request locator finds what `re.search(r"\\[(\\w+)\\((.*)\\)\\]", text)` finds."""
    rng = random.Random(7)
    pieces = ["[", "]", "(", ")", ")]", "[A(", "[Ab_1(", "x='1'", ", ", "\n", " ", "API-Request: ", "é",
              "[[B("]
    texts = ["", "[A()]", "[A(x='1')] [B(y='2')]", "[A(\n)]", "[A(x)] and\n[B(y)]", "([A(x)])"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 30))) for _ in range(3000)]
    for text in texts:
        m = OFFICIAL_CALL.search(text)
        head = locate(text)
        if m is None:
            assert head is None, text
            continue
        assert head is not None and head.start() == m.start() and head.group(1) == m.group(1), text
        request = official_request(text)
        assert request.name == m.group(1) and request.arguments == official_arguments(m.group(2)), text


def test_official_parameter_reading_keeps_its_quirks() -> None:
    read = official_request
    assert read("API-Request: [A(x='1', y=\"2\", z=3)] thanks").arguments == {"x": "1", "y": "2", "z": "3"}
    assert read("[A(attendees='['Ann', 'Bo']')]").arguments == {"attendees": "["}  # quoted list cut short
    assert read("[A(attendees=['Ann', 'Bo'])]").arguments == {"attendees": "['Ann', 'Bo']"}  # bare: text
    assert read("[A(content='Don't go')]").arguments == {"content": "Don"}  # ends at its first quote
    assert read("[A(x='1'), B(x='2', y='3')]").arguments == {"x": "2", "y": "3"}  # two calls read as one
    assert read("[A(n=2.5)]").arguments == {"n": "2"}
    # corrected: Python literals, whole
    assert corrected_request("[A(attendees='['Ann', 'Bo']')]").arguments == {"attendees": ["Ann", "Bo"]}
    assert corrected_request("[A(content=\"Don't go\", n=2.5, on=True)]").arguments == {
        "content": "Don't go", "n": "2.5", "on": "True"}
    assert corrected_request("[A(x='1'), B(y='2')]").error.startswith("one_request_one_call")
    assert corrected_request("[A(x='1')] then [B(y='2')]").error.startswith("one_request_one_call")
    assert corrected_request("[A(x='1')] -> done").arguments == {"x": "1"}


def test_hostile_completions_never_raise(pairs) -> None:
    level, s = _first(pairs, "Calculator")
    texts = [None, 5, "", "[" * 100_000, "[a(" * 30_000 + ")]", "x" * 200_000,
             "[Calculator(formula=[1, 2])]", "[Calculator(formula={'a': 1})]", "[Calculator(formula='1/0')]",
             "[Calculator(formula='((1+2)')]", "[Calculator(formula='" + "(" * 500 + "1" + ")" * 500 + "')]"]
    for template in ("bfcl", "tool_n1"):
        for scoring in Scoring:
            for text in texts:
                verdict = apibank.score(s, level, text, template, scoring=scoring)
                assert not verdict.valid and verdict.error
    # an operator first in the formula makes the official Calculator loop forever: refused, not hung
    verdict = apibank.score(s, level, "[Calculator(formula='*33')]", "bfcl")
    assert not verdict.valid and verdict.error.startswith("unscorable_offline")


def test_bad_arguments_and_missing_truth(pairs, tmp_path, shared_data_dir) -> None:
    level, s = pairs[0]
    with pytest.raises(ValueError, match="scoring"):
        apibank.score(s, level, "", "bfcl", scoring="lenient")
    bare = dataclasses.replace(s, meta={k: v for k, v in s.meta.items() if k != apibank.TRUTH_KEY})
    assert apibank.score(bare, level, "[A()]", "bfcl").error.startswith("no_truth")
    # the level files alone are not enough: the dialogue folder holds the results compared with
    for name in ("level-1-api.json", "level-2-api.json"):
        shutil.copy(shared_data_dir / "apibank" / name, tmp_path / name)
    with pytest.raises(FileNotFoundError, match="dialogue"):
        apibank.data_files(tmp_path)
