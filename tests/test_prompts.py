"""Prompt templates: every category rendered in every template round-trips (render gold -> parse -> exact
match); the R2IF template; kept reasoning is the data's own; the chat-template reasoning check; BFCL's own
system prompt."""

import subprocess
import sys
from pathlib import Path

import pytest

from tooltune.config import ConfigError, UnknownName
from tooltune.matching import calls_match
from tooltune.parsing import R2IF_REJECTION, parse_completion
from tooltune.prompts import (
    PROBE_MARKER,
    TEMPLATES,
    BfclPromptError,
    ReasoningHistoryLost,
    bfcl_default_system,
    check_history_reasoning,
    get_template,
    grammar_for,
    history_reasoning_survives,
    prompt_tools,
    register_template,
    render_answer,
    render_chat,
    render_prompt,
    resolve_native,
)
from tooltune.prompts.render import render_target
from tooltune.prompts.templates import BFCL_STRONG_SUFFIX, UnresolvedTemplate
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


def _for_the_tiny_model(request, template):
    """`template` as the tiny model answers in it: a chat-tools template resolved against its tokenizer."""
    if not get_template(template).chat_tools:
        return template
    return resolve_native(request.getfixturevalue("tiny_tokenizer"), template)


def _answer_through_the_chat_template(request, sample, template, text):
    """Under a template whose tools go to the chat template (``native``), the answer as the chat template
    writes it after the generation prompt (it must write it unchanged)."""
    tok = request.getfixturevalue("tiny_tokenizer")
    messages, tools = render_prompt(sample, template), prompt_tools(sample, template)
    prompt = render_chat(tok, messages, tools=tools)
    full = render_chat(tok, [*messages, {"role": "assistant", "content": text}], False, tools=tools)
    assert full.startswith(prompt + text)
    return full[len(prompt) : len(prompt) + len(text)]


@pytest.mark.parametrize("sample", CASES, ids=lambda s: s.category)
@pytest.mark.parametrize("template", sorted(TEMPLATES))  # every registered template, native included
def test_every_category_round_trips(sample, template, request):
    template = _for_the_tiny_model(request, template)
    text = render_target(sample, template)
    if get_template(template).chat_tools:
        text = _answer_through_the_chat_template(request, sample, template, text)
    grammar = grammar_for(template)
    p = parse_completion(text, grammar)
    assert p.format_ok, p.error
    assert calls_match(p.calls, sample.answer)
    assert p.rejected == (grammar.rejection is not None and not sample.answer)


TAGGED = [ToolCall("get_weather", {"city": "</tool_call></think><tool>", "unit": "<response>f"}),
          ToolCall("book.table", {"n": 2})]


@pytest.mark.parametrize("template", sorted(TEMPLATES))
@pytest.mark.parametrize("reasoning", [None, "check <think>the</think> </reason> weather"])
def test_values_and_reasoning_holding_tags_round_trip(template, reasoning, request):
    template = _for_the_tiny_model(request, template)
    text = render_answer(TAGGED, template, reasoning=reasoning)
    p = parse_completion(text, grammar_for(template))
    assert p.format_ok, p.error
    assert calls_match(p.calls, TAGGED)


def test_tool_n1_system_prompt_lists_tools_and_instructions():
    msgs = render_prompt(CASES[0])
    assert msgs[0]["role"] == "system" and msgs[-1] == {"role": "user", "content": "please help"}
    system = msgs[0]["content"]
    assert '<tools>\n{"name": "get_weather"' in system
    assert all(f"{i}." in system for i in (1, 2, 3))


def test_r2if_prompt_states_rejection_and_structure():
    system = render_prompt(CASES[0], "r2if")[0]["content"]
    assert R2IF_REJECTION == "None of function can be used"  # the R2IF paper's text, word for word
    assert f"exactly this text inside <tool>: {R2IF_REJECTION}" in system
    assert "#function_name#" in system and '"For #function_name#:"' in system and "- parameter:" in system
    # the paper's note on arguments missing from the request or restricted to enumerated values
    assert "missing from the request" in system and "enumerated values" in system
    rejection = render_target(CASES[4], "r2if")
    assert rejection.endswith(f"<tool>{R2IF_REJECTION}</tool>")
    assert parse_completion(rejection, "r2if").rejected


def test_r2if_default_reasoning_has_a_function_block_per_call():
    text = render_target(CASES[3], "r2if")  # parallel_multiple: get_weather(city) + book.table(n)
    reasoning = parse_completion(text, "r2if").reasoning
    assert reasoning.splitlines() == [
        "Step1: the request is served by #get_weather#, #book.table#.",
        "Step2:",
        "For #get_weather#:",
        '- city: "Paris" as stated in the request.',
        "For #book.table#:",
        "- n: 2 as stated in the request.",
    ]


def test_messages_history_keeps_roles_and_can_drop_reasoning():
    ms = CASES[-1]
    kept = render_prompt(ms, "tool_n1", history="messages", keep_reasoning=True)
    assert [m["role"] for m in kept] == ["system", "user", "assistant", "tool"]
    assert kept[2]["content"].startswith("<think>first the weather</think>")
    dropped = render_prompt(ms, "tool_n1", history="messages", keep_reasoning=False)
    assert "<think>" not in dropped[2]["content"] and "<tool_call>" in dropped[2]["content"]


@pytest.mark.parametrize("template", ["tool_n1", "r2if"])
@pytest.mark.parametrize("history", ["messages", "context"])
def test_kept_reasoning_is_only_ever_the_datas_own(template, history):
    """An earlier turn without reasoning renders as its call block alone, exactly as when reasoning is
    dropped: no invented sentence, no empty reasoning block. The SFT target still gets a reasoning."""
    messages = [dict(m) for m in CASES[-1].messages]
    messages[1] = {k: v for k, v in messages[1].items() if k != "reasoning"}
    blank, tags_only = {**messages[1], "reasoning": "  "}, {**messages[1], "reasoning": "<think>"}
    for no_reasoning in (messages[1], blank, tags_only):
        s = _s("multi_step", CASES[-1].answer, [messages[0], no_reasoning, messages[2]])
        kept = render_prompt(s, template, history=history, keep_reasoning=True)
        dropped = render_prompt(s, template, history=history, keep_reasoning=False)
        assert kept == dropped
        reasoning_tag = grammar_for(template).reasoning[0]
        assert reasoning_tag not in "".join(m["content"] for m in kept[1:])
    target = render_target(s, template)
    assert target.startswith(grammar_for(template).reasoning[0])
    assert parse_completion(target, template).format_ok


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
    with pytest.raises(UnknownName, match=r"unknown template 'tiny_tes' \(did you mean tiny_test\?\)"):
        get_template("tiny_tes")
    with pytest.raises(ValueError, match="history mode"):
        render_prompt(CASES[0], history="weird")
    with pytest.raises(ConfigError, match="'native' is a template .* use 'messages'"):
        render_prompt(CASES[0], history="native")


def test_an_unresolved_native_template_is_an_error_naming_the_resolution():
    """The registered ``native`` holds no grammar: rendering, parsing or scoring under the bare name says
    how to resolve it, instead of answering in a placeholder format."""
    assert get_template("native").answer_grammar is None and not get_template("native").resolved
    for use in (lambda: render_answer([], "native"), lambda: grammar_for("native"),
                lambda: render_target(CASES[0], "native")):
        with pytest.raises(UnresolvedTemplate, match=r"resolve_native\(tokenizer, 'native'\)"):
            use()
    served = resolve_native(None, "native")  # a chat template an endpoint applies: hermes
    assert served.grammar is grammar_for("hermes") and get_template("native").answer_grammar is None


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
    with pytest.raises(UnknownName, match="tools_format: unknown tools format 'yaml'"):
        register_template("tiny_bad", "T:{tools}", "tool_n1", tools_format="yaml")


# --- chat templates and kept reasoning ---------------------------------------------------------------

QWEN3_LIKE = """\
{%- set ns = namespace(last_query_index=messages|length - 1) %}
{%- for message in messages %}
    {%- if message.role == "user" %}{%- set ns.last_query_index = loop.index0 %}{%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = "" %}
        {%- if "</think>" in content %}
            {%- set reasoning_content = content.split("</think>")[0].split("<think>")[-1] %}
            {%- set content = content.split("</think>")[-1].lstrip("\\n") %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index and reasoning_content %}
            {{- "<|im_start|>assistant\\n<think>\\n" + reasoning_content + "\\n</think>\\n\\n" }}
            {{- content + "<|im_end|>\\n" }}
        {%- else %}
            {{- "<|im_start|>assistant\\n" + content + "<|im_end|>\\n" }}
        {%- endif %}
    {%- else %}
        {{- "<|im_start|>" + message.role + "\\n" + message.content + "<|im_end|>\\n" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- "<|im_start|>assistant\\n" }}{%- endif %}
"""
"""Qwen3's rule for assistant turns: <think> is kept only after the last user message."""

KEEPS_ALL = """{% for m in messages %}<|{{ m.role }}|>{{ m.content }}
{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"""


def test_detector_sees_qwen3_style_stripping_of_earlier_reasoning():
    assert not history_reasoning_survives(QWEN3_LIKE, "tool_n1")
    assert history_reasoning_survives(KEEPS_ALL, "tool_n1")
    # Qwen3's rule only knows <think>: R2IF's <reason> block survives it
    assert history_reasoning_survives(QWEN3_LIKE, "r2if")
    # a grammar without a reasoning block has nothing to lose
    assert history_reasoning_survives(QWEN3_LIKE, "bfcl")
    # within the current turn (after the last user message) the same template keeps the reasoning
    answer = f"<think>{PROBE_MARKER}</think>\n<tool_call>\n[]\n</tool_call>"
    same_turn = [{"role": "user", "content": "q"}, {"role": "assistant", "content": answer}]
    assert PROBE_MARKER in render_chat(QWEN3_LIKE, same_turn, add_generation_prompt=False)


def test_detector_renders_the_projects_own_template_and_tokenizers():
    from tooltune.models.tokenizer import CHAT_TEMPLATE  # {% generation %} blocks, as transformers renders

    assert history_reasoning_survives(CHAT_TEMPLATE, "tool_n1")

    class Tok:
        chat_template = QWEN3_LIKE

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            assert tokenize is False and add_generation_prompt is True
            return render_chat(self.chat_template, messages)

    assert not history_reasoning_survives(Tok(), "tool_n1")
    with pytest.raises(TypeError, match="chat template source or a tokenizer"):
        history_reasoning_survives(42, "tool_n1")


def test_check_history_reasoning_raises_or_warns_only_when_reasoning_is_lost(caplog):
    assert check_history_reasoning(KEEPS_ALL, "tool_n1")
    assert check_history_reasoning(QWEN3_LIKE, "tool_n1", keep_reasoning=False)
    assert check_history_reasoning(QWEN3_LIKE, "tool_n1", history="context")
    lost = r"training.keep_reasoning: .*<think>…</think>.*history: context"
    with pytest.raises(ReasoningHistoryLost, match=lost):
        check_history_reasoning(QWEN3_LIKE, "tool_n1", where="training.keep_reasoning")
    assert check_history_reasoning(QWEN3_LIKE, "tool_n1", on_loss="warn") is False
    assert "Qwen3" in caplog.text


# --- BFCL's own system prompt -------------------------------------------------------------------------


def test_bfcl_templates_use_bfcl_evals_default_system_prompt():
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")
    from bfcl_eval.constants.default_prompts import DEFAULT_SYSTEM_PROMPT_FORMAT
    from bfcl_eval.model_handler.utils import formulate_system_prompt

    sample = CASES[3]
    official = formulate_system_prompt(DEFAULT_SYSTEM_PROMPT_FORMAT, [t.to_dict() for t in sample.tools])
    assert render_prompt(sample, "bfcl")[0]["content"] == official
    assert render_prompt(sample, "bfcl_strong")[0]["content"] == official + BFCL_STRONG_SUFFIX
    assert get_template("bfcl").system.count("{tools}") == 1
    assert bfcl_default_system() is bfcl_default_system()  # read once


def test_templates_import_without_bfcl_eval_and_say_what_is_missing(monkeypatch):
    code = ("import sys; import tooltune.prompts as p; p.render_answer([], 'bfcl'); "
            "assert not any(m.startswith('bfcl_eval') for m in sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])
    for name in [m for m in sys.modules if m == "bfcl_eval" or m.startswith("bfcl_eval.")] + ["bfcl_eval"]:
        monkeypatch.setitem(sys.modules, name, None)  # what an environment without bfcl-eval sees
    bfcl_default_system.cache_clear()
    try:
        missing = r"bfcl-eval's own default system prompt.*requirements/bfcl"
        with pytest.raises(BfclPromptError, match=missing):
            render_prompt(CASES[0], "bfcl")
        assert render_prompt(CASES[0], "bfcl", system_prompt="Functions: {tools}")[0]["content"].startswith(
            "Functions: [")
    finally:
        bfcl_default_system.cache_clear()


@pytest.mark.parametrize("sample", CASES, ids=lambda s: s.category)
def test_toolrl_targets_score_the_toolrl_maximum(sample):
    from tooltune.rewards import get_reward

    text = render_target(sample, "toolrl")
    assert '"parameters"' in text or not sample.answer
    assert get_reward("toolrl")(text, sample.answer) == 4.0
