"""Property tests: every reward stays in its documented range and never raises, whatever the input."""

import hashlib
import json
import logging

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooltune.parsing import R2IF_REJECTION
from tooltune.rewards import binary_reward, get_reward
from tooltune.rewards.smv import SMVReward
from tooltune.schema import ToolCall


class HashEncoder:
    """Deterministic pseudo-random unit vectors: any cosine in [-1, 1] can occur."""

    def encode(self, texts):
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha1(t.encode("utf-8", "surrogatepass")).digest()[:4], "little")
            v = np.random.default_rng(seed).normal(size=8)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


GOLD = [ToolCall("f", {"a": 1, "b": "x"}), ToolCall("g", {})]
TOOLS = [
    {
        "name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
    }
]
REWARDS = {
    name: get_reward(name, template=t)
    for name, t in [
        ("binary", "tool_n1"),
        ("correctness", "tool_n1"),
        ("format", "r2if"),
        ("fine_grained", "tool_n1"),
        ("toolrl", "tool_n1"),
        ("toolrl_correctness", "r2if"),
    ]
}
REWARDS["binary_r2if"] = get_reward("binary", template="r2if")
REWARDS["binary_substring"] = get_reward("binary", format_mode="substring")
REWARDS["fine_grained_substring"] = get_reward("fine_grained", format_mode="substring")
REWARDS["fine_grained_r2if"] = get_reward("fine_grained", template="r2if")
REWARDS["toolrl_toolrl"] = get_reward("toolrl", template="toolrl")
REWARDS["toolrl_format_substring"] = get_reward("toolrl_format", template="toolrl", format_mode="substring")
REWARDS["smv"] = SMVReward(encoder=HashEncoder(), tau=0.0)
REWARDS["smv_r2if_default_tau"] = SMVReward(encoder=HashEncoder())

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=20,
)
fragments = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<reason>",
        "</reason>",
        "<tool>",
        "</tool>",
        "<response>",
        "</response>",
        '"parameters"',
        "Step2:",
        "#f#",
        "- a: 1\n",
        "[",
        "]",
        "{",
        "}",
        '"name"',
        '"arguments"',
        ":",
        ",",
        '"f"',
        "1",
        "1.0",
        '"1"',
        "true",
        R2IF_REJECTION,
        "\n",
        " ",
    ]
)
template_soup = st.lists(fragments | st.text(max_size=6), max_size=40).map("".join)


def structured(calls):
    block = json.dumps(calls)
    lines = "\n".join(json.dumps(c) for c in calls) if isinstance(calls, list) else block
    return [
        f"<think>r</think>\n<tool_call>\n{block}\n</tool_call>",
        f"<reason>Step2:\n#f#\n- a: one\n</reason><tool>{block}</tool>",
        f"<think>r</think>\n<tool_call>\n{lines}\n</tool_call>",
        f"<think>r</think>\n<tool_call>\n{lines.replace('arguments', 'parameters')}\n</tool_call>",
    ]


class Failures(logging.Handler):
    """Collects the warnings a reward logs when it turns an internal exception into its floor value."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


FAILURES = Failures()
logging.getLogger("tooltune").addHandler(FAILURES)


def check_all(text, answer=GOLD):
    FAILURES.records.clear()
    for name, r in REWARDS.items():
        v = r(text, answer, tools=TOOLS)
        assert r.lo <= v <= r.hi, (name, v)
    assert binary_reward(text, answer) in (0.0, 1.0)
    assert FAILURES.records == []  # in range by design, not by the exception safety net


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.text(max_size=300))
def test_arbitrary_strings(text):
    check_all(text)


@SETTINGS
@given(template_soup)
def test_template_fragment_soup(text):
    check_all(text)
    check_all(text, [])


@SETTINGS
@given(json_values)
def test_arbitrary_json_in_the_call_block(value):
    for text in structured(value):
        check_all(text)


@SETTINGS
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(["f", "g", "h"]),
                "arguments": st.dictionaries(st.sampled_from("abc"), json_values, max_size=3),
            }
        ),
        max_size=5,
    )
)
def test_well_formed_calls_with_arbitrary_arguments(calls):
    for text in structured(calls):
        check_all(text)
        check_all(text, [])


@SETTINGS
@given(json_values)
def test_arbitrary_json_as_ground_truth_never_raises(answer):
    text = structured([{"name": "f", "arguments": {"a": 1}}])[0]
    for r in REWARDS.values():
        assert r.lo <= r(text, answer, tools=TOOLS) <= r.hi
    assert binary_reward(text, json.dumps(answer)) in (0.0, 1.0)


@pytest.mark.parametrize(
    "text",
    [
        "<think>" + "x" * 1_000_000 + "</think><tool_call>[]</tool_call>",  # 1 MB
        "<think>r</think><tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>",  # deeply nested
        "<think>r</think><tool_call>" + '{"name": "f", "arguments": ' * 5_000 + "</tool_call>",
        "<think>r</think><tool_call>["
        + ",".join(['{"name": "g", "arguments": {}}'] * 3_000)
        + "]</tool_call>",
        "<reason>Step2:\n" + "#f#\n- a: 1\n" * 20_000 + "</reason><tool>[]</tool>",
        "<think>r</think>\n<tool_call>\n" + '{"name": "f", "parameters": {}}\n' * 2_000 + "</tool_call>",
        "<think>r</think>\n<tool_call>\n" + "[" * 50_000 + "\n</tool_call>\n<response>" * 1_000,
        "\x00\ud800" * 1000,
    ],
)
def test_huge_and_deeply_nested_inputs(text):
    check_all(text)
    check_all(text, [])


class EchoStudent:
    """A student that continues with arbitrary text (the continuation strategy of the test)."""

    name = "echo"

    def __init__(self, text):
        self.text = text

    def generate(self, requests):
        return [[self.text] * r.n for r in requests]


@SETTINGS
@given(template_soup, template_soup)
def test_cer_stays_in_range_on_arbitrary_completions_and_continuations(completion, continuation):
    from tooltune.rewards.cer import CERReward

    FAILURES.records.clear()
    cer = CERReward(student=EchoStudent(continuation), k=2)
    prompt = [{"role": "user", "content": "q"}]
    for answer in (GOLD, []):
        assert -1.0 <= cer(completion, answer, prompt=prompt, sample_id="s") <= 1.0
    assert FAILURES.records == []


def test_hostile_json_columns_read_as_none_and_never_raise():
    from tooltune.schema.rows import load_json_column

    for hostile in ("[" * 100_000, "1" * 5_000, '{"a": NaN}', "\xff{", "{"):
        assert load_json_column(hostile) is None
    assert load_json_column('{"tools": []}') == {"tools": []}
