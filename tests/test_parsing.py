"""Parsing: grammar verdicts, decoders, adversarial input, and render -> parse round trips."""

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooltune.matching import calls_match
from tooltune.parsing import (
    MAX_BLOCK_CHARS,
    MAX_DEPTH,
    R2IF_REJECTION,
    parse_completion,
    parse_json_calls,
    parse_python_calls,
)
from tooltune.prompts import render_answer
from tooltune.rewards import binary_reward
from tooltune.schema import Parsed, ToolCall

GOOD = (
    "<think>weather needed</think>\n<tool_call>\n"
    '[{"name": "get_weather", "arguments": {"city": "Paris"}}]\n</tool_call>'
)
CALL = [ToolCall("get_weather", {"city": "Paris"})]


def test_tool_n1_strict_accepts_the_canonical_answer():
    p = parse_completion(GOOD)
    assert p.format_ok and p.error is None
    assert p.reasoning == "weather needed"
    assert p.calls == CALL


def test_single_object_is_a_one_call_list_and_empty_list_is_no_call():
    one = '<think>r</think><tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
    assert parse_completion(one).calls == [ToolCall("f", {"a": 1})]
    none = "<think>nothing fits</think><tool_call>[]</tool_call>"
    p = parse_completion(none)
    assert p.format_ok and p.calls == []


@pytest.mark.parametrize(
    "text, reason",
    [
        ("<think>a</think><think>b</think><tool_call>[]</tool_call>", "expected one <think>"),
        ("<think>a<think>b</think></think><tool_call>[]</tool_call>", "expected one <think>"),
        (
            '<think>x <tool_call>[{"name":"f","arguments":{}}]</tool_call></think><tool_call>[]</tool_call>',
            "expected one <tool_call>",
        ),
        ("<think>a</think><tool_call>[]</tool_call> trailing words", "text after"),
        ("preamble <think>a</think><tool_call>[]</tool_call>", "text before"),
        ("<think>a</think> chatter <tool_call>[]</tool_call>", "text between"),
        ("<think>   </think><tool_call>[]</tool_call>", "empty <think>"),
        ("<tool_call>[]</tool_call><think>a</think>", "must follow"),
        ("<think>a</think><tool_call>[{'name': 'f'}]</tool_call>", "not valid JSON"),
        (
            '<think>a</think><tool_call>[{"name": "f", "arguments": {"a": 1, "a": 2}}]</tool_call>',
            "duplicate key",
        ),
        ('<think>a</think><tool_call>[{"name": "f", "arguments": {"a": NaN}}]</tool_call>', "not valid JSON"),
        ('<think>a</think><tool_call>[{"name": "f"}]</tool_call>', "no 'arguments'"),
        ('<think>a</think><tool_call>[{"name": "f", "arguments": "{}"}]</tool_call>', "not an object"),
        ('<think>a</think><tool_call>[{"name": "f", "arguments": {}, "x": 1}]</tool_call>', "unexpected key"),
        ('<think>a</think><tool_call>"f"</tool_call>', "not a list"),
        ("<think>a</think>", "found 0 <tool_call>"),
    ],
)
def test_strict_rejects_malformed_and_known_hacks(text, reason):
    p = parse_completion(text)
    assert not p.format_ok
    assert reason in p.error


def test_substring_mode_reproduces_original_scorer_and_lets_the_hack_through():
    hack = (
        "<think>a</think><think>b</think>junk<tool_call>[]</tool_call><tool_call>"
        '[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call> trailing'
    )
    assert not parse_completion(hack).format_ok
    p = parse_completion(hack, mode="substring")
    assert p.format_ok and p.calls == CALL  # last block wins
    assert not parse_completion("no tags at all", mode="substring").format_ok


def test_r2if_grammar_and_rejection_text():
    ok = '<reason>Step1 #f# Step2 - a: given</reason><tool>[{"name": "f", "arguments": {"a": 1}}]</tool>'
    assert parse_completion(ok, "r2if").calls == [ToolCall("f", {"a": 1})]
    rej = parse_completion(f"<reason>nothing fits</reason>\n<tool> {R2IF_REJECTION} </tool>", "r2if")
    assert rej.format_ok and rej.rejected and rej.calls == []
    assert not parse_completion("<reason>x</reason><tool>[]</tool>", "r2if").format_ok
    assert not parse_completion(ok + " extra", "r2if").format_ok


def test_python_call_lists_with_hard_values():
    text = (
        '[Get Manager Placeholder Image(sport="football"), math.factorial(n=5), '
        "f(s='a, b (c) \\'q\\'', xs=[1, [2, 3]], d={'k': (1, 2)}, t=True, n=None, j=null, neg=-2.5)]"
    )
    calls = parse_python_calls(text)
    assert calls == [
        ToolCall("Get Manager Placeholder Image", {"sport": "football"}),
        ToolCall("math.factorial", {"n": 5}),
        ToolCall(
            "f",
            {
                "s": "a, b (c) 'q'",
                "xs": [1, [2, 3]],
                "d": {"k": [1, 2]},
                "t": True,
                "n": None,
                "j": None,
                "neg": -2.5,
            },
        ),
    ]
    assert parse_python_calls("f()") == [ToolCall("f", {})]
    assert parse_python_calls("```python\n[f(a=1)]\n```") == [ToolCall("f", {"a": 1})]
    assert parse_python_calls("[]") == []


@pytest.mark.parametrize(
    "bad",
    [
        "[f(1)]",
        "[f(a=x)]",
        "[f(a=__import__('os').system('true'))]",
        "[f(a=1, a=2)]",
        "[f(a=1)",
        "[f(a=1) g(b=2)]",
        "[f(a=b'x')]",
        "[f(a=1j)]",
        "[(a=1)]",
        "[f(a=[1)]",
        "[f(a=lambda: 1)]",
    ],
)
def test_python_calls_refuse_non_literals_and_malformed(bad):
    assert parse_python_calls(bad) is None


def test_hermes_and_json_grammars():
    h = (
        '<think>t</think> I will call.\n<tool_call>\n{"name": "f", "arguments": "{\\"a\\": 1}"}\n</tool_call>'
        '<tool_call>{"name": "g", "arguments": {}}</tool_call>'
    )
    p = parse_completion(h, "hermes")
    assert p.format_ok and p.calls == [ToolCall("f", {"a": 1}), ToolCall("g", {})]
    assert p.reasoning == "t"
    assert parse_completion("Just text.", "hermes").calls == []
    assert not parse_completion("<tool_call>{oops</tool_call>", "hermes").format_ok
    assert parse_json_calls('```json\n[{"name": "f", "arguments": {"x": 1}}]\n```') == [
        ToolCall("f", {"x": 1})
    ]
    assert parse_json_calls("not json") is None


def test_long_reasoning_is_scanned_and_only_the_call_block_is_bounded():
    # a long-reasoning model's 30k+ tokens of thought before a right answer
    answer = '<tool_call>[{"name": "f", "arguments": {"a": 1}}]</tool_call>'
    long_thought = "<think>" + "step by step. " * 20_000 + "</think>" + answer
    assert len(long_thought) > 2 * MAX_BLOCK_CHARS
    p = parse_completion(long_thought)
    assert p.format_ok and p.calls == [ToolCall("f", {"a": 1})]
    assert binary_reward(long_thought, [{"name": "f", "arguments": {"a": 1}}]) == 1.0
    big_block = "<think>x</think><tool_call>" + " " * MAX_BLOCK_CHARS + "[]</tool_call>"
    assert "call block longer than" in parse_completion(big_block).error
    assert "longer than" in parse_completion("[f(a='" + "x" * MAX_BLOCK_CHARS + "')]", "python").error
    assert parse_completion("x" * MAX_BLOCK_CHARS + "[]", "json").format_ok is False
    hermes = "t" * (2 * MAX_BLOCK_CHARS) + '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    assert parse_completion(hermes, "hermes").calls == [ToolCall("f", {})]


def test_substring_reads_the_last_block_as_the_original_scorer_does():
    good = '<think>r</think><tool_call>[{"name": "f", "arguments": {}}]</tool_call>'
    # a stray closing tag after a correct block does not move the block
    stray = parse_completion(good + "</tool_call>", mode="substring")
    assert stray.format_ok and stray.calls == [ToolCall("f", {})]
    # an opening tag inside a block is part of its content: the block does not decode
    nested = '<think>r</think><tool_call><tool_call>[{"name": "f", "arguments": {}}]</tool_call>'
    assert parse_completion(nested, mode="substring").calls is None
    # with two complete blocks the last one counts
    two = good + '<tool_call>[{"name": "g", "arguments": {}}]</tool_call>'
    assert parse_completion(two, mode="substring").calls == [ToolCall("g", {})]
    # the strict format refuses all three
    assert not any(parse_completion(t).format_ok for t in (good + "</tool_call>", nested, two))


def test_bounds_depth_and_time():
    deep = "<think>a</think><tool_call>" + "[" * 10_000 + "]" * 10_000 + "</tool_call>"
    assert "nesting deeper" in parse_completion(deep).error
    assert parse_python_calls("[f(a=" + "[" * 10_000 + "]" * 10_000 + ")]") is None
    within = (
        '<think>a</think><tool_call>[{"name": "f", "arguments": {"a": '
        + "[" * (MAX_DEPTH - 3)
        + "]" * (MAX_DEPTH - 3)
        + "}}]</tool_call>"
    )
    assert parse_completion(within).format_ok
    t0 = time.perf_counter()
    assert not parse_completion("<think>" * 200_000).format_ok  # 1.4 MB of repeated tags: counted linearly
    parse_completion("<think>x</think><tool_call>" + '"' * (MAX_BLOCK_CHARS - 40) + "</tool_call>")
    assert (
        parse_completion("\ud800<think>\udfff</think><tool_call>[]</tool_call>").error
        == "text before <think>"
    )
    del t0  # timing is measured in bench/, not asserted here


def test_non_string_input_and_unknown_template():
    assert parse_completion(None).format_ok is False
    assert parse_completion(b"<think>".decode()).format_ok is False
    with pytest.raises(ValueError, match="unknown grammar"):
        parse_completion("x", grammar="nope")
    with pytest.raises(ValueError, match="unknown format mode"):
        parse_completion("x", mode="loose")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.]{0,15}", fullmatch=True)
calls_st = st.lists(
    st.builds(ToolCall, name=names, arguments=st.dictionaries(identifiers, json_values, max_size=4)),
    max_size=4,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=calls_st,
    template=st.sampled_from(["tool_n1", "r2if", "hermes", "python", "json"]),
    reasoning=st.text(max_size=40),
)
def test_rendered_calls_parse_back_to_the_same_calls(calls, template, reasoning):
    if template == "r2if" and not calls:
        text = render_answer(calls, template, reasoning=reasoning)
        p = parse_completion(text, template)
        assert p.format_ok and p.rejected
        return
    text = render_answer(calls, template, reasoning=reasoning)
    p = parse_completion(text, template)
    assert p.format_ok, (text, p.error)
    assert calls_match(p.calls, calls)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(max_size=400),
    template=st.sampled_from(["tool_n1", "r2if", "hermes", "python", "json"]),
    mode=st.sampled_from(["strict", "substring"]),
)
def test_parsing_never_raises_on_any_string(text, template, mode):
    p = parse_completion(text, template, mode)
    assert isinstance(p, Parsed)
    assert p.format_ok == (p.error is None) or p.rejected
    if p.calls is not None:
        assert all(isinstance(c, ToolCall) for c in p.calls)


tag_soup = st.lists(
    st.sampled_from(
        [
            "<think>",
            "</think>",
            "<tool_call>",
            "</tool_call>",
            "[",
            "]",
            "{",
            "}",
            '"name"',
            '"arguments"',
            ":",
            ",",
            " ",
            "x",
            '"',
            "\\",
            "f(",
            ")",
            "=",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300)
@given(text=tag_soup)
def test_parsing_never_raises_on_tag_soup(text):
    for template in ("tool_n1", "hermes", "python"):
        for mode in ("strict", "substring"):
            assert isinstance(parse_completion(text, template, mode), Parsed)
    assert parse_python_calls(text) is None or isinstance(parse_python_calls(text), list)


def test_call_block_json_roundtrip_with_tag_text_inside_values():
    calls = [ToolCall("f", {"s": "</tool_call> <think>", "t": "a<b"})]
    text = render_answer(calls)
    p = parse_completion(text)
    assert p.format_ok and p.calls == calls
    assert json.loads(text.split("<tool_call>")[1].split("</tool_call>")[0])[0]["arguments"]["s"].startswith(
        "</"
    )
