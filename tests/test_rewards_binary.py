"""Tool-N1 binary reward (Eq. 4) and the agreement of every reward with the restated original scorers."""

import json
import pickle

import pytest

from tooltune.cli import main
from tooltune.config import UnknownName
from tooltune.parsing import R2IF_REJECTION
from tooltune.prompts import render_answer
from tooltune.rewards import binary_reward, get_reward
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


def test_substring_mode_reproduces_the_original_scorer():
    # the original scorer accepts text around the blocks; strict does not
    for name in ("text after call block", "text before think", "two call blocks"):
        expected = 0.0 if name == "two call blocks" else 1.0  # there the last block, [], counts
        assert binary_reward(HACKS[name], GOLD, format_mode="substring") == expected
    # each think tag once, </think> before the first <tool_call> (the adaptation's two rules)
    for name in ("repeated think", "nested think", "call block before think", "missing think"):
        assert binary_reward(HACKS[name], GOLD, format_mode="substring") == 0.0, name
    right = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
    # a single object, duplicate keys (the last wins) and extra keys, as json.loads reads them
    assert binary_reward(n1(right), GOLD, format_mode="substring") == 1.0
    dup = '[{"name": "get_weather", "arguments": {"city": "Rome", "days": 3, "city": "Paris"}, "id": 1}]'
    assert binary_reward(n1(dup), GOLD, format_mode="substring") == 1.0
    assert binary_reward(n1(dup), GOLD) == 0.0  # strict refuses duplicate and extra keys
    # arguments as a JSON string never equal an object (the original compares json.dumps of each)
    as_string = json.dumps([{"name": "get_weather", "arguments": json.dumps(GOLD_DICTS[0]["arguments"])}])
    assert binary_reward(n1(as_string), GOLD, format_mode="substring") == 0.0
    # a stray closing tag after the block does not move it; an opening tag inside a block spoils it
    assert binary_reward(GOOD + "</tool_call>", GOLD, format_mode="substring") == 1.0
    nested = GOOD.replace("<tool_call>", "<tool_call><tool_call>")
    assert binary_reward(nested, GOLD, format_mode="substring") == 0.0
    # where the original raises (a bare scalar) or decodes again (double-encoded JSON), 0
    assert binary_reward(n1("42"), GOLD, format_mode="substring") == 0.0
    assert binary_reward(n1(json.dumps(json.dumps(GOLD_DICTS))), GOLD, format_mode="substring") == 0.0


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
    with pytest.raises(UnknownName, match="reward: unknown reward 'nope'; registered: binary,"):
        get_reward("nope")


# --- agreement with the restated original scorers (bench/reward_agreement.py) --------------------------


def test_agreement_bench_every_disagreement_is_documented(tmp_path, capsys):
    out = tmp_path / "agreement.json"
    assert main(["bench", "reward_agreement", "--n", "6", "--repeats", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["undocumented"] == []
    table = report["agreement"]
    assert len(table) >= 30 and all(c["n"] > 0 for row in table.values() for c in row.values())
    for cls in ("well-formed, right", "well-formed, wrong value", "well-formed, a call missing",
                "well-formed, duplicate call", "no reasoning block", "unclosed reasoning block",
                "broken JSON after a right reasoning block", "arguments as a JSON string",
                "nested call tags", "ToolRL format, right", "ToolRL format, wrong value"):
        assert all(c["agree"] == c["n"] for c in table[cls].values()), cls
    # substring and the original agree everywhere but on double-encoded JSON, and the original raises
    # on a bare scalar
    for cls, row in table.items():
        c = row["binary substring"]
        assert c["agree"] + c["original_raises"] == c["n"] or cls == "call list as a JSON string", cls
    assert table["bare scalar in the block"]["binary substring"]["original_raises"] > 0
    assert set(report["throughput"]) >= {"binary strict", "binary substring", "fine_grained strict", "toolrl"}
    assert "| reward | ours /s |" in capsys.readouterr().out


def test_native_formats_with_bare_text_values_are_typed_by_the_rows_tools(tiny_model_dir) -> None:
    """Qwen3.5 writes `<parameter=zip>75001</parameter>`: untyped it reads as the number 75001; the
    reward types it by the row's chat-template tools (the `chat_tools` column), as the prompt declared."""
    import importlib.util
    from pathlib import Path

    from transformers import AutoTokenizer  # deferred: heavy

    from tooltune.prompts import CHAT_TOOLS_COLUMN, resolve_native

    source = Path(importlib.util.find_spec("trl").origin).parent / "chat_templates" / "qwen3_5_think.jinja"
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = source.read_text(encoding="utf-8")
    native = resolve_native(tok, "native")  # the model's own format, as a value
    gold = [ToolCall("lookup", {"zip": "75001"})]
    tools = [{"type": "function", "function": {"name": "lookup", "description": "Find a zip code.",
              "parameters": {"type": "object", "properties": {"zip": {"type": "string"}}}}}]
    completion = render_answer(gold, native)
    reward = get_reward("binary", template=native, require_format=False)
    answer = json.dumps([c.to_dict() for c in gold])
    assert reward.batch([completion], [answer], **{CHAT_TOOLS_COLUMN: [json.dumps(tools)]}) == [1.0]
    assert reward.batch([completion], [answer]) == [0.0]  # without the schemas: 75001, a number
    clone = pickle.loads(pickle.dumps(reward))  # TRL and verl copy rewards into other processes
    assert clone.batch([completion], [answer], **{CHAT_TOOLS_COLUMN: [json.dumps(tools)]}) == [1.0]
    assert clone.grammar.name == native.grammar.name and clone.batch([completion], [answer]) == [0.0]
