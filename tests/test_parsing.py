"""Parsing: grammar verdicts, decoders, adversarial input, and render -> parse round trips."""

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooltune.config import Registry, UnknownName
from tooltune.matching import calls_match
from tooltune.parsing import (
    GRAMMARS,
    MAX_BLOCK_CHARS,
    MAX_DEPTH,
    MODES,
    R2IF_REJECTION,
    Grammar,
    all_tags,
    get_grammar,
    parse_call_names,
    parse_calls,
    parse_completion,
    parse_json_calls,
    parse_parts,
    parse_python_calls,
    register_grammar,
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
        "Sure! <think>a</think>junk<tool_call>[]</tool_call><tool_call>"
        '[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call> trailing'
    )
    assert not parse_completion(hack).format_ok
    p = parse_completion(hack, mode="substring")
    assert p.format_ok and p.calls == CALL and p.reasoning == "a"  # last block wins, any text around
    assert not parse_completion("no tags at all", mode="substring").format_ok


@pytest.mark.parametrize(
    "text, calls",
    [
        # a single object is a one-call list
        ('<think>r</think><tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>',
         [ToolCall("f", {"a": 1})]),
        # json.loads semantics: the last duplicate key wins, other keys are ignored, NaN is read
        ('<think>r</think><tool_call>[{"name": "f", "arguments": {"a": 2, "a": 1}, "id": 7}]</tool_call>',
         [ToolCall("f", {"a": 1})]),
        ('<think>r</think><tool_call>[{"name": "f", "arguments": {"a": NaN}}]</tool_call>', "calls"),
        # "arguments" given as a JSON string is not decoded: it never equals an object
        ('<think>r</think><tool_call>[{"name": "f", "arguments": "{\\"a\\": 1}"}]</tool_call>', None),
        ('<think>r</think><tool_call>[{"name": "f"}]</tool_call>', None),  # "arguments" is required
        # each think tag exactly once, and </think> before the first <tool_call>
        ("<think>a</think><think>b</think><tool_call>[]</tool_call>", None),
        ("<think>a<tool_call>x</tool_call></think><tool_call>[]</tool_call>", None),
        ("<tool_call>[]</tool_call><think>late</think>", None),
        ("<tool_call>[]</tool_call>", None),
        # where the original raises (a bare scalar) or decodes once more (a call list in a JSON string)
        ("<think>r</think><tool_call>42</tool_call>", None),
        ('<think>r</think><tool_call>"[{\\"name\\": \\"f\\", \\"arguments\\": {}}]"</tool_call>', None),
    ],
)
def test_substring_mode_follows_the_original_rules(text, calls):
    p = parse_completion(text, mode="substring")
    if calls is None:
        assert not p.format_ok and p.calls is None and p.error
    elif calls == "calls":
        assert p.format_ok and p.calls is not None
    else:
        assert p.format_ok and p.calls == calls


def test_parse_calls_reads_the_last_block_under_the_original_rules():
    text = 'junk <tool_call>[]</tool_call> more <tool_call>[{"name": "f", "arguments": {"a": 1, "a": 2}}]'
    assert parse_calls(text + "</tool_call> trailing").calls == [ToolCall("f", {"a": 2})]
    assert parse_calls(text).calls == []  # the second block is not closed: the first one counts
    assert parse_calls('<tool_call>[{"name": "f", "arguments": "{}"}]</tool_call>').calls is None
    assert parse_calls(None).calls is None
    assert parse_call_names('<tool_call>[{"name": "f", "arguments": "{}"}, {"name": "g", "arguments": 1}]'
                            "</tool_call>") == ["f", "g"]
    assert parse_call_names('<tool_call>[{"name": "f"}]</tool_call>') is None
    assert parse_call_names("<tool_call>5</tool_call>") is None
    r2if = f"<reason>r</reason><tool>{R2IF_REJECTION}</tool>"
    assert parse_call_names(r2if, "r2if") == [] and parse_calls(r2if, "r2if").rejected


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


def check_invariants(p: Parsed, template: str) -> None:
    """A failed format says why and reads no calls; only toolrl (format about tags) may pass the format
    with a call block that does not decode, and then says why."""
    assert isinstance(p, Parsed)
    assert p.format_ok or (p.error and p.calls is None)
    if template != "toolrl":
        assert p.format_ok == (p.error is None) or p.rejected
    elif p.format_ok and p.calls is None:
        assert p.error
    if p.calls is not None:
        assert all(isinstance(c, ToolCall) for c in p.calls)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(max_size=400),
    template=st.sampled_from(["tool_n1", "r2if", "toolrl", "hermes", "python", "json"]),
    mode=st.sampled_from(["strict", "substring"]),
)
def test_parsing_never_raises_on_any_string(text, template, mode):
    check_invariants(parse_completion(text, template, mode), template)
    assert isinstance(parse_calls(text, template), Parsed)
    assert isinstance(parse_parts(text, template, mode).reasoning_ok, bool)
    names = parse_call_names(text, template)
    assert names is None or all(isinstance(n, str) for n in names)


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
    for template in ("tool_n1", "toolrl", "hermes", "python"):
        for mode in ("strict", "substring"):
            check_invariants(parse_completion(text, template, mode), template)
    assert parse_python_calls(text) is None or isinstance(parse_python_calls(text), list)


@settings(max_examples=400)
@given(
    text=tag_soup,
    mode=st.sampled_from(["strict", "substring"]),
    template=st.sampled_from(["tool_n1", "r2if"]),
)
def test_format_holds_exactly_when_both_halves_do(text, mode, template):
    """The fine-grained reward scores the halves apart; together they are the format verdict."""
    if template == "r2if":
        text = text.replace("<think>", "<reason>").replace("</think>", "</reason>")
        text = text.replace("<tool_call>", "<tool>").replace("</tool_call>", "</tool>")
    for t in (text, text.replace("x", '[{"name": "f", "arguments": {}}]')):
        p, parts = parse_completion(t, template, mode), parse_parts(t, template, mode)
        assert p.format_ok == (parts.reasoning_ok and parts.calls is not None), (t, p, parts)
        if p.format_ok:
            assert p.calls == parts.calls


def test_format_halves_on_examples():
    right = '[{"name": "f", "arguments": {}}]'
    assert parse_parts(f"<think>r</think><tool_call>{right}</tool_call>") == (True, [ToolCall("f", {})])
    # no or an unclosed reasoning block: the call half still holds
    assert parse_parts(f"<tool_call>{right}</tool_call>") == (False, [ToolCall("f", {})])
    assert parse_parts(f"<think>r <tool_call>{right}</tool_call>") == (False, [ToolCall("f", {})])
    # broken JSON after a right reasoning block: the reasoning half still holds
    assert parse_parts("<think>r</think><tool_call>[{</tool_call>") == (True, None)
    # text after the block breaks the strict call half, not the substring one
    assert parse_parts(f"<think>r</think><tool_call>{right}</tool_call> ok?") == (True, None)
    assert parse_parts(f"<think>r</think><tool_call>{right}</tool_call> ok?", mode="substring").calls
    assert parse_parts(f"<think>r</think><tool_call>{right}</tool_call>", "python") == (False, None)
    assert parse_parts(None) == (False, None)


def toolrl_answer(calls, reasoning="r", response=None, key="parameters"):
    lines = "\n".join(json.dumps({"name": c.name, key: c.arguments}) for c in calls)
    text = f"<think>{reasoning}</think>\n<tool_call>\n{lines}\n</tool_call>"
    return text + (f"\n<response>{response}</response>" if response is not None else "")


TWO = [ToolCall("f", {"a": 1}), ToolCall("g", {})]


@pytest.mark.parametrize(
    "text, ok, calls",
    [
        (toolrl_answer(TWO), True, TWO),
        ("  \n" + toolrl_answer(TWO) + "\n ", True, TWO),  # the answer is stripped first
        (toolrl_answer(TWO, response="Done."), True, TWO),
        ("<think>no tool fits</think>\n<response>Sorry.</response>", True, []),
        ("<think>just thinking</think>", True, []),
        (toolrl_answer(TWO).replace("</think>\n", "</think>"), False, None),  # newline required
        (toolrl_answer(TWO).replace("<tool_call>\n", "<tool_call>"), False, None),
        (toolrl_answer(TWO).replace("\n</tool_call>", "</tool_call>"), False, None),
        (toolrl_answer(TWO) + " trailing", False, None),
        ("Sure. " + toolrl_answer(TWO), False, None),
        (toolrl_answer(TWO) + "\n" + toolrl_answer(TWO), False, None),  # two call blocks
        (toolrl_answer(TWO, response="a") + "<response>b</response>", False, None),
        ("<think>a</think>\n<think>b</think>\n<response>x</response>", True, []),  # as ToolRL's .*? allows
        # the format is about tags: a block that does not decode passes it, with no calls
        (toolrl_answer(TWO).replace('{"name": "g"', '{"name": g'), True, None),
        (toolrl_answer(TWO, key="arguments"), True, None),  # "parameters" is ToolRL's key
        ('<think>r</think>\n<tool_call>\n[{"name": "f", "parameters": {}}]\n</tool_call>', True, None),
        (toolrl_answer(TWO).replace('\n{"name": "g"', '\n\n{"name": "g"'), True, None),  # an empty line
    ],
)
def test_toolrl_grammar(text, ok, calls):
    p = parse_completion(text, "toolrl")
    assert p.format_ok == ok, p.error
    assert p.calls == calls
    if ok and calls is not None:
        assert p.reasoning in ("r", "no tool fits", "just thinking", "a</think>\n<think>b")


def test_toolrl_substring_mode_and_the_block_toolrl_reads():
    loose = toolrl_answer(TWO).replace("</think>\n", "</think>  ").replace("<tool_call>\n", "<tool_call>")
    assert not parse_completion(loose, "toolrl").format_ok
    assert parse_completion(loose, "toolrl", "substring").calls == TWO
    # the calls-only read: from the first <tool_call> to the next call tag of either kind
    two = toolrl_answer(TWO[:1]) + "\n" + toolrl_answer(TWO[1:]).split("\n", 1)[1]
    assert parse_calls(two, "toolrl").calls == TWO[:1]
    nested = toolrl_answer(TWO).replace("<tool_call>\n", "<tool_call>\n<tool_call>\n", 1)
    assert parse_calls(nested, "toolrl").calls is None  # ToolRL reads the empty text between the two
    assert parse_calls("</tool_call> x <tool_call>\n" + json.dumps({"name": "f", "parameters": {}}),
                       "toolrl").calls == [ToolCall("f", {})]  # a closing tag anywhere will do
    assert parse_calls("<tool_call>\n" + json.dumps({"name": "f", "parameters": {}}), "toolrl").calls is None
    assert parse_calls("an answer in words", "toolrl").calls == []


def test_call_block_json_roundtrip_with_tag_text_inside_values():
    calls = [ToolCall("f", {"s": "</tool_call> <think>", "t": "a<b"})]
    text = render_answer(calls)
    p = parse_completion(text)
    assert p.format_ok and p.calls == calls
    assert json.loads(text.split("<tool_call>")[1].split("</tool_call>")[0])[0]["arguments"]["s"].startswith(
        "</"
    )


# ------------------------------------------------------------------------------- rendering on the grammar

RENDER_CASES = [
    [],
    [ToolCall("get_weather", {"city": "Paris", "unit": "c"})],
    [ToolCall("get.x", {"s": "</tool_call> <think> \"q\" 'a'", "n": [1, 2.5, True, None]}),
     ToolCall("g", {})],
    [ToolCall("f", {"obj": {"k": {"z": "é"}}, "neg": -3})],
]


@pytest.mark.parametrize("calls", RENDER_CASES, ids=range(len(RENDER_CASES)))
@pytest.mark.parametrize("name", sorted(GRAMMARS))  # every registered grammar
def test_every_grammar_renders_what_it_parses(name, calls):
    grammar = GRAMMARS[name]
    for mode in MODES:
        for reasoning in (None, "check the weather"):
            text = grammar.render(calls, reasoning)
            p = parse_completion(text, grammar, mode)
            assert p.format_ok, (mode, text, p.error)
            assert calls_match(p.calls, calls), (mode, text)
            assert p.rejected == (grammar.rejection is not None and not calls)
    if grammar.reasoning is not None and grammar.default_reasoning is not None:
        assert parse_completion(grammar.render(calls, "  "), grammar).reasoning  # the grammar's default
        assert grammar.render(calls, None, fill_reasoning=False) == grammar.render(
            calls, "x", include_reasoning=False)  # the call block alone


def test_render_uses_the_templates_default_reasoning_and_cleans_tags():
    grammar = GRAMMARS["tool_n1"]
    text = grammar.render(CALL, None, default_reasoning=lambda calls: "<think>Go</think>")
    assert text.startswith("<think>Go</think>\n<tool_call>")
    assert grammar.render(CALL, "a </tool_call> b").startswith("<think>a  b</think>")


def test_a_grammar_without_a_renderer_is_refused_at_registration():
    decode = GRAMMARS["json"].decode
    with pytest.raises(TypeError, match="no renderer"):
        register_grammar(Grammar("no_renderer", decode, None))
    with pytest.raises(TypeError):
        Grammar("no_renderer", decode)  # the renderer is a required field
    assert "no_renderer" not in GRAMMARS
    with pytest.raises(ValueError, match="already registered"):
        register_grammar(Grammar("json", decode, GRAMMARS["python"].renderer))


@pytest.fixture
def scratch_grammars(monkeypatch):
    """The grammar registry as a copy for one test: what the test registers is gone after it."""
    from tooltune.parsing import grammar as module

    scratch = Registry("grammar")
    for name, grammar in module.GRAMMARS.items():
        scratch.add(name, grammar)
    monkeypatch.setattr(module, "GRAMMARS", scratch)
    all_tags.cache_clear()
    yield scratch
    all_tags.cache_clear()


def test_a_registered_name_keeps_its_grammar(scratch_grammars):
    json_grammar = scratch_grammars["json"]
    first = register_grammar(Grammar("test_bound", json_grammar.decode, json_grammar.renderer))
    second = Grammar("test_bound", scratch_grammars["python"].decode, scratch_grammars["python"].renderer)
    with pytest.raises(ValueError, match="already registered"):
        register_grammar(second)
    assert scratch_grammars["test_bound"] is first and register_grammar(first) is first


def test_an_unknown_grammar_names_the_closest_registered_ones():
    assert isinstance(GRAMMARS, Registry)
    with pytest.raises(UnknownName, match=r"grammar: unknown grammar 'hermez' \(did you mean hermes\?\)"):
        get_grammar("hermez")
    with pytest.raises(UnknownName, match="did you mean tool_n1"):
        parse_completion("x", "tool_n2")  # a ValueError and a KeyError too, as a dict lookup raised
    with pytest.raises(KeyError):
        GRAMMARS["tool_n2"]


def test_a_registered_grammar_joins_the_tags_every_renderer_escapes(scratch_grammars):
    json_grammar = scratch_grammars["json"]
    custom = Grammar("test_fenced", json_grammar.decode, json_grammar.renderer,
                     reasoning=("<plan>", "</plan>"))
    assert register_grammar(custom) is custom and "<plan>" in all_tags()
    text = scratch_grammars["tool_n1"].render([ToolCall("f", {"v": "<plan>"})], "ok")
    assert "<plan>" not in text and parse_completion(text).calls == [ToolCall("f", {"v": "<plan>"})]
