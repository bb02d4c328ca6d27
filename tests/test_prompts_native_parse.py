"""The bounded native decoders on hostile text: fuzzing finds no exception and no answer accepted over a
limit, the inputs that make transformers' parser superlinear are refused before it runs, and the
regex-literal helpers the limits rely on."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooltune.parsing import MAX_CALLS, MAX_DEPTH, MODES
from tooltune.prompts import MAX_NATIVE_CHARS, native_grammar
from tooltune.prompts.native_parse import literal_head, literal_tail, read_bare_value
from tooltune.schema import Parsed, ToolCall

TEMPLATES_DIR = Path(importlib.util.find_spec("trl").origin).parent / "chat_templates"
FAMILIES = ["qwen3", "qwen3_5_think", "llama3_1", "gptoss", "glm4moe", "lfm2_2_5", "nemotron_3_nano",
            "gemma4_v5"]
"""One template per response format TRL ships."""

CALLS = [ToolCall("get_weather", {"city": "Paris", "days": 3}),
         ToolCall("search", {"q": "a, b", "tags": [1]})]


@pytest.fixture(scope="module")
def grammars(tiny_model_dir: Path):
    from transformers import AutoTokenizer  # deferred: heavy

    out = {}
    for name in FAMILIES:
        tok = AutoTokenizer.from_pretrained(tiny_model_dir)
        tok.chat_template = (TEMPLATES_DIR / f"{name}.jinja").read_text(encoding="utf-8")
        g = native_grammar(tok)
        one_call = name in ("llama3_1", "gptoss")
        good = g.render(CALLS[:1] if one_call else CALLS, "Some reasoning." if g.reasoning_key else None)
        markers = sorted({*g.format.literals, *g.format.call_heads, *(x for p in g.format.paired for x in p)})
        out[name] = (g, good, markers)
    return out


def _depth(value, d=0):
    if isinstance(value, dict):
        return max((_depth(v, d + 1) for v in value.values()), default=d + 1)
    if isinstance(value, list):
        return max((_depth(v, d + 1) for v in value), default=d + 1)
    return d


def _within_limits(p: Parsed, text: str) -> None:
    assert isinstance(p, Parsed)
    assert p.format_ok == (p.error is None)
    if p.format_ok:
        assert len(text) <= MAX_NATIVE_CHARS and p.calls is not None and len(p.calls) <= MAX_CALLS
        for c in p.calls:
            assert isinstance(c, ToolCall) and c.name.strip() and isinstance(c.arguments, dict)
            assert _depth(c.arguments) <= MAX_DEPTH
    else:
        assert p.calls is None and p.error


FRAGMENTS = ["{", "}", "[", "]", '"', "'", ",", ":", "=", "(", ")", " ", "\n", "<", ">", "|", "a", "1",
             "null", "True", '"x"', "\\", "\x01", "\x02", "é", "{" * 40, "[" * 40, " " * 50]


@pytest.mark.parametrize("name", FAMILIES)
def test_fuzzed_marker_soup_never_raises_and_never_accepts_over_a_limit(grammars, name):
    g, good, markers = grammars[name]
    pieces = st.sampled_from([*markers, *FRAGMENTS, good])

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(pieces, max_size=40).map("".join), st.sampled_from(MODES))
    def check(text, mode):
        _within_limits(g.decode(text, mode), text)
        _within_limits(g.decode(text, "calls"), text)

    check()


@pytest.mark.parametrize("name", FAMILIES)
def test_fuzzed_edits_of_a_valid_answer_never_raise(grammars, name):
    g, good, markers = grammars[name]
    assert g.decode(good, "strict").format_ok

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.integers(0, len(good)), st.integers(0, len(good)),
           st.sampled_from(["", *markers, *FRAGMENTS]), st.integers(1, 3))
    def check(i, j, insert, times):
        i, j = min(i, j), max(i, j)
        text = good[:i] + insert * times + good[j:]
        for mode in MODES:
            _within_limits(g.decode(text, mode), text)

    check()


def _refused(g, text: str, why: str) -> None:
    for mode in (*MODES, "calls"):
        p = g.decode(text, mode)
        assert not p.format_ok and p.calls is None and why in p.error, (mode, p.error)


def test_over_limit_answers_are_refused(grammars):
    g, good, _ = grammars["qwen3"]
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    assert len(g.decode(call * MAX_CALLS, "strict").calls) == MAX_CALLS
    _refused(g, call * (MAX_CALLS + 1), f"more than {MAX_CALLS} calls")
    _refused(g, "x" * (MAX_NATIVE_CHARS + 1), f"longer than {MAX_NATIVE_CHARS}")
    nested = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    deep = '<tool_call>\n{"name": "f", "arguments": {"a": ' + nested + "}}\n</tool_call>"
    _refused(g, deep, "nesting deeper")
    very_deep = '<tool_call>\n{"name": "f", "arguments": {"a": ' + "[" * 100_000 + "\n</tool_call>"
    _refused(g, very_deep, "")
    _refused(g, "<think>" * (MAX_CALLS + 1), "more than")
    _refused(g, "<|im_end|>" * (MAX_CALLS + 1), "more than")
    lfm, _, _ = grammars["lfm2_2_5"]  # a call opener without a literal head is counted by its matches
    _refused(lfm, "<|tool_call_start|>[" + ", ".join(["f()"] * (MAX_CALLS + 1)) + "]<|tool_call_end|>",
             f"more than {MAX_CALLS} calls")


def test_inputs_that_make_the_parser_superlinear_are_refused_before_it_runs(grammars):
    """Each of these takes transformers' parser minutes on its own (a value of whitespace without its
    closing tag backtracks cubically; an opener that looks ahead for </think> rescans at every position;
    every marker starts another scan; delimited strings are substituted one by one)."""
    xml, _, _ = grammars["qwen3_5_think"]
    head = "r\n</think>\n\n<tool_call>\n<function=f>\n<parameter=a>\n"
    _refused(xml, head + " " * 50_000 + "x", "<parameter=… without its </parameter>")
    _refused(xml, head + "<parameter=a>\n" * 5_000, "<parameter=… without its </parameter>")
    _refused(xml, head + "v\n</parameter>\n" * 2 + "</parameter>", "</parameter> without its <parameter=")
    nemotron, _, _ = grammars["nemotron_3_nano"]
    _refused(nemotron, "</think>" * 5_000, "more than")
    p = nemotron.decode("x" * 150_000, "strict")  # no </think>: one scan, not one per position
    assert p.format_ok and p.calls == []
    gemma, _, _ = grammars["gemma4_v5"]
    _refused(gemma, '<|tool_call>call:f{a:' + '<|"|>' * 20_000, "string delimiters")
    oss, _, _ = grammars["gptoss"]
    _refused(oss, "to=functions." * 5_000, "more than")
    lfm, _, _ = grammars["lfm2_2_5"]  # the streaming pass's partial matching is not run
    p = lfm.decode("<think>r</think><|tool_call_start|>[get_we" + '<|"|>' * 30_000, "strict")
    assert p.format_ok and p.calls == []


def test_limits_are_the_same_for_every_mode(grammars):
    for g, good, _ in grammars.values():
        for mode in (*MODES, "calls"):
            assert g.decode(good * (MAX_CALLS + 1), mode).format_ok is False


@pytest.mark.parametrize("pattern, head, tail", [
    (r"<tool_call>", "<tool_call>", "<tool_call>"),
    (r"</think>\s*", "</think>", ""),
    (r"<tool_call>\s*<function=(?P<name>[^\n>]+)>", "<tool_call>", ">"),
    (r"<parameter=(?P<key>[^>\n]+)>\s*(?P<value>.*?)\s*</parameter>", "<parameter=", "</parameter>"),
    (r"to=functions\.(?P<name>\S+?)<\|channel\|>commentary\s+json<\|message\|>", "to=functions.",
     "json<|message|>"),
    (r"(?:<\|tool_call_start\|>\[|,\s*)(?P<name>\w+)\(", "", "("),
    (r"(?:<turn\|>|<\|tool_response>|<eos>)\s*|$", "", ""),
    (r'\{"name":\s*"(?P<name>[^"]+)",\s*"parameters":\s*', '{"name":', ""),
    (r"ab?c", "a", "c"),
])
def test_regex_literal_heads_and_tails(pattern, head, tail):
    assert literal_head(pattern) == head and literal_tail(pattern) == tail


def test_bare_values_read_as_they_look_without_a_schema():
    texts = ("3", "1.5", "[1, 2]", '{"a": null}', "null", "True", "None", "Paris")
    assert [read_bare_value(v) for v in texts] == [3, 1.5, [1, 2], {"a": None}, None, True, None, "Paris"]
    assert read_bare_value("[" * 100_000) == "[" * 100_000  # too deep for JSON: the text itself
