"""Every category rendered in every template round-trips: render gold -> parse -> exact match."""

import pytest

from tooltune.matching import calls_match
from tooltune.parsing import parse_completion
from tooltune.prompts import (
    TEMPLATES,
    get_template,
    grammar_for,
    register_template,
    render_answer,
    render_prompt,
)
from tooltune.prompts.render import render_target
from tooltune.schema import Sample, ToolCall

W = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City, State"},
            "unit": {"type": "string", "enum": ["c", "f"]},
        },
        "required": ["city"],
    },
}
T = {
    "name": "book.table",
    "description": "Book a table.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}


def _s(category, answer, messages=None, tools=(W, T)):
    return Sample(
        id=category,
        source="unit",
        category=category,
        tools=list(tools),
        answer=answer,
        messages=messages or [{"role": "user", "content": "please help"}],
    )


CASES = [
    _s("simple", [{"name": "get_weather", "arguments": {"city": "Austin, TX"}}], tools=[W]),
    _s("multiple", [{"name": "book.table", "arguments": {"n": 4}}]),
    _s(
        "parallel",
        [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "get_weather", "arguments": {"city": "Rome", "unit": "f"}},
        ],
        tools=[W],
    ),
    _s(
        "parallel_multiple",
        [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "book.table", "arguments": {"n": 2}},
        ],
    ),
    _s("irrelevance", []),
    _s(
        "multi_step",
        [{"name": "book.table", "arguments": {"n": 3}}],
        messages=[
            {"role": "user", "content": "weather in Oslo, then book for 3"},
            {
                "role": "assistant",
                "content": "",
                "reasoning": "first the weather",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
            },
            {"role": "tool", "name": "get_weather", "content": '{"temp": 3}'},
        ],
    ),
]


@pytest.mark.parametrize("sample", CASES, ids=lambda s: s.category)
@pytest.mark.parametrize("template", ["tool_n1", "r2if", "bfcl", "bfcl_strong"])
def test_every_category_round_trips(sample, template):
    text = render_target(sample, template)
    p = parse_completion(text, grammar_for(template))
    assert p.format_ok, p.error
    assert calls_match(p.calls, sample.answer)
    assert p.rejected == (template == "r2if" and not sample.answer)


def test_tool_n1_system_prompt_lists_tools_and_instructions():
    msgs = render_prompt(CASES[0])
    assert msgs[0]["role"] == "system" and msgs[-1] == {"role": "user", "content": "please help"}
    system = msgs[0]["content"]
    assert '<tools>\n{"name": "get_weather"' in system
    assert all(f"{i}." in system for i in (1, 2, 3))


def test_r2if_prompt_states_rejection_and_structure():
    system = render_prompt(CASES[0], "r2if")[0]["content"]
    assert "#function_name#" in system and "- parameter:" in system and "I cannot complete" in system


def test_native_history_keeps_roles_and_can_drop_reasoning():
    ms = CASES[-1]
    native = render_prompt(ms, "tool_n1", history="native", keep_reasoning=True)
    assert [m["role"] for m in native] == ["system", "user", "assistant", "tool"]
    assert native[2]["content"].startswith("<think>first the weather</think>")
    dropped = render_prompt(ms, "tool_n1", history="native", keep_reasoning=False)
    assert "<think>" not in dropped[2]["content"] and "<tool_call>" in dropped[2]["content"]


def test_context_history_is_one_user_turn():
    ctx = render_prompt(CASES[-1], "tool_n1", history="context")
    assert [m["role"] for m in ctx] == ["system", "user"]
    body = ctx[1]["content"]
    assert "User: weather in Oslo" in body and "Tool result from get_weather" in body and "<think>" in body
    assert "<think>" not in render_prompt(CASES[-1], history="context", keep_reasoning=False)[1]["content"]


def test_system_prompt_override_and_sample_system_message():
    s = _s(
        "simple", [], messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x"}]
    )
    msgs = render_prompt(s, system_prompt="Tools: {tools}")
    assert msgs[0]["content"].startswith('Tools: {"name"') and msgs[0]["content"].endswith("Be brief.")


def test_register_template_with_custom_system_prompt():
    register_template("tiny_test", "T:{tools}", "tool_n1")
    assert "tiny_test" in TEMPLATES and get_template("tiny_test").grammar.name == "tool_n1"
    text = render_answer([ToolCall("f", {})], "tiny_test")
    assert parse_completion(text, grammar_for("tiny_test")).calls == [ToolCall("f", {})]
    with pytest.raises(ValueError, match="unknown prompt template"):
        get_template("missing")
    with pytest.raises(ValueError, match="history mode"):
        render_prompt(CASES[0], history="weird")


def test_signature_tool_format_lists_types_enums_and_optional_parameters():
    from tooltune.prompts import tool_signatures
    from tooltune.schema import ToolSpec

    tools = [
        ToolSpec("get_weather", "", {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["city", "unit"]}),
        ToolSpec("ping", "Check the server.", {"type": "object", "properties": {}, "required": []}),
    ]
    assert tool_signatures(tools).splitlines() == [
        "get_weather(city: string, unit: celsius|fahrenheit, days?: integer, tags?: list[string])",
        "ping() - Check the server.",
    ]
    register_template("tiny_sig", "T:\n{tools}", "tool_n1", tools_format="signatures")
    sample = Sample(id="s", source="t", category="simple", messages=[{"role": "user", "content": "hi"}],
                    tools=tools, answer=[])
    assert render_prompt(sample, "tiny_sig")[0]["content"] == "T:\n" + tool_signatures(tools)
    with pytest.raises(ValueError, match="unknown tools_format"):
        register_template("tiny_bad", "T:{tools}", "tool_n1", tools_format="yaml")
