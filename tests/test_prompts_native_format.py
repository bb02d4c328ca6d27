"""The ``native`` template over every chat template TRL bundles (offline: the tiny tokenizer with each
template swapped in): a template that writes tool calls is accepted and its answers round-trip through
its own response parser, a template without tool support is refused in one line, the answer is what
the chat template writes, the parser is transformers' own, and TRL's training variant is offered where
the stock template drops earlier reasoning."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tooltune.matching import calls_match
from tooltune.parsing import NO_CALL_REPLY, parse_completion
from tooltune.prompts import (
    ChatToolsUnsupported,
    NativeGrammar,
    PromptTemplate,
    ReasoningHistoryLost,
    check_history_reasoning,
    get_template,
    grammar_for,
    grammar_with_tools,
    native_grammar,
    prompt_tools,
    render_chat,
    render_prompt,
    render_target,
    resolve_native,
    use_training_chat_template,
)
from tooltune.prompts.templates import UnresolvedTemplate
from tooltune.schema import Sample, ToolCall

TEMPLATES_DIR = Path(importlib.util.find_spec("trl").origin).parent / "chat_templates"
BUNDLED = sorted(p.stem for p in TEMPLATES_DIR.glob("*.jinja"))

NOT_ACCEPTED = {
    # writes tool calls, but its stock template cannot take the arguments as an object
    "deepseekv3": "fails on a conversation with tools and tool calls",
    # writes tool calls, but never shows the model the tools it is given
    "deepseekv3_training": "does not list the tools it is given",
    # its own format; the checkpoint ships a response_template (test_a_tokenizers_own_response_template)
    "muse_glimmer": "no known response parser reads back",
    "muse_glimmer_training": "no known response parser reads back",
}
"""Bundled templates that write tool calls (TRL's `supports_tool_calling`) but cannot carry ``native``."""


def _tool(name, **props):
    return {"name": name, "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": props, "required": []}}


TOOLS = [
    _tool("get_weather", city={"type": "string"}, days={"type": "integer"}),
    _tool("book_table", n={"type": "integer"}),
    _tool("search", q={"type": "string"}, limit={"type": "integer"}, ratio={"type": "number"},
          tags={"type": "array", "items": {"type": "string"}}, filter={"type": "object"}),
    _tool("toggle", flag={"type": "boolean"}, v={"type": ["string", "null"]}),
    _tool("lookup", zip={"type": "string"}),
    _tool("math.factorial", n={"type": "integer"}),
    _tool("ping"),
]
ANSWERS = {
    "one": [ToolCall("get_weather", {"city": "Austin, TX", "days": 3})],
    "two": [ToolCall("get_weather", {"city": "Oslo"}), ToolCall("book_table", {"n": 2})],
    "types": [ToolCall("search", {"q": 'café "quoted" <b>', "limit": 10, "ratio": 0.5, "tags": ["a", "b"],
                                  "filter": {"k": [1, 2]}})],
    "bool": [ToolCall("toggle", {"flag": False})],
    "null": [ToolCall("toggle", {"v": None})],
    "zip": [ToolCall("lookup", {"zip": "75001"})],
    "dotted": [ToolCall("math.factorial", {"n": 5})],
    "no_args": [ToolCall("ping", {})],
    "no_call": [],
}

CANNOT_WRITE = {
    **{n: {"two"} for n in ("llama3_1", "llama3_2", "gptoss", "gptoss_training")},  # one call per turn
    **{n: {"dotted"} for n in BUNDLED if n.startswith(("gemma4", "diffusion_gemma", "lfm2"))},  # \w names
    **{n: {"dotted", "null"} for n in ("gemma4", "gemma4_v2", "gemma4_v3", "gemma4_v4")},  # writes None
}
"""Answers a format cannot carry: rendering them is a ValueError, never a silently different answer."""

TEXT_VALUED = ("qwen3_5", "qwen3_6", "qwen3_8", "glm4moe", "nemotron")
NEEDS_SCHEMA = {
    **{n: {"zip"} for n in BUNDLED if n.startswith(TEXT_VALUED)},  # "75001" is written as 75001 is
    **{n: {"bool", "null"} for n in BUNDLED if n.startswith("lfm2")},  # False is read back as "False"
}
"""Answers whose values read back exactly only with the tools' schemas (`NativeGrammar.with_tools`)."""


def _sample(kind: str) -> Sample:
    return Sample(id=kind, source="unit", category="simple", tools=TOOLS, answer=ANSWERS[kind],
                  messages=[{"role": "user", "content": "please help"}],
                  meta={"reasoning": "The request names what to call."})


@pytest.fixture(scope="module")
def tok(tiny_model_dir: Path):
    from transformers import AutoTokenizer  # deferred: heavy

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture
def swap(tok):
    """Put a bundled template (by name) in the tokenizer."""

    def put(name: str):
        tok.chat_template = (TEMPLATES_DIR / f"{name}.jinja").read_text(encoding="utf-8")
        return tok

    return put


def _writes_tool_calls(tok) -> bool:
    from trl.chat_template_utils import supports_tool_calling  # deferred: heavy

    return supports_tool_calling(tok)


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_template_is_accepted_or_refused_in_one_line(swap, name):
    tok = swap(name)
    if not _writes_tool_calls(tok) or name in NOT_ACCEPTED:
        with pytest.raises(ChatToolsUnsupported) as e:
            resolve_native(tok)
        assert "\n" not in str(e.value) and "Pick a template" in str(e.value)
        assert NOT_ACCEPTED.get(name, "") in str(e.value)
        assert get_template("native").answer_grammar is None  # the registered template never changes
        return
    native = resolve_native(tok)
    grammar = native.grammar
    assert isinstance(grammar, NativeGrammar) and grammar_for(native) is grammar
    assert get_template("native").answer_grammar is None
    assert grammar.name == f"native_{name}" or name.startswith("diffusion_gemma")  # TRL has no parser for it
    for kind in ANSWERS:
        _round_trip(tok, name, kind, native)


def _round_trip(tok, name: str, kind: str, native: PromptTemplate) -> None:
    sample, grammar = _sample(kind), native.grammar
    if kind in CANNOT_WRITE.get(name, ()):
        with pytest.raises(ValueError, match="cannot write this answer|does not read back"):
            render_target(sample, native)
        return
    answer = render_target(sample, native)
    tools = prompt_tools(sample, native)
    typed = parse_completion(answer, grammar_with_tools(grammar, tools), "strict")
    assert typed.format_ok and calls_match(typed.calls, sample.answer), (name, kind, answer, typed)
    plain = parse_completion(answer, grammar_for(native), "strict")
    assert plain.format_ok, (name, kind, plain.error)
    lossy = kind in NEEDS_SCHEMA.get(name, ())
    assert calls_match(plain.calls, sample.answer) != lossy, (name, kind, plain)
    # the answer is what the chat template writes after the generation prompt of the sample's prompt
    messages = render_prompt(sample, native)
    prompt = render_chat(tok, messages, tools=tools)
    reasoning = sample.meta["reasoning"] if grammar.reasoning_key else None
    turn = grammar.assistant_message(sample.answer, reasoning, "" if sample.answer else NO_CALL_REPLY)
    full = render_chat(tok, [*messages, turn], False, tools=tools)
    assert full.startswith(prompt + answer), (name, kind)
    assert full[len(prompt + answer) :] in ("", grammar.trailer)  # at most the end-of-turn text is left out
    if reasoning:  # a call's reasoning is written; Gemma 4 before v5 writes none with a final reply
        assert typed.reasoning == reasoning if sample.answer else typed.reasoning in (reasoning, None)
    # a backend that keeps the end-of-turn text gets the same calls
    kept = parse_completion(answer + grammar.trailer, grammar_with_tools(grammar, tools), "strict")
    assert kept.format_ok and kept.calls == typed.calls


@pytest.mark.parametrize("name", ["qwen3", "qwen3_5_think", "llama3_1", "gptoss", "glm4moe", "lfm2_2_5",
                                  "nemotron_3_nano", "gemma4_v5"])
def test_the_decoder_is_the_tokenizers_own_parse_response(swap, name):
    """On the answers the template writes, the bounded decoder's message is exactly what
    `tokenizer.parse_response` (TRL's response template) returns."""
    from trl.chat_template_utils import add_response_schema  # deferred: heavy

    tok = add_response_schema(swap(name))
    grammar = native_grammar(tok)
    for kind, calls in ANSWERS.items():
        if kind in CANNOT_WRITE.get(name, ()):
            continue
        answer = grammar.render(calls, "Some reasoning.")
        text = answer + grammar.format.terminator
        expected = tok.parse_response(text, prefix=grammar.generation_prompt)
        assert grammar.format.message(answer) == expected, (name, kind)
    del tok.response_template


def test_a_tokenizers_own_response_template(swap):
    """A tokenizer that ships a response_template (Muse Glimmer's checkpoint does; TRL has none for it)
    is read with it: here one written for the test, in transformers' format."""
    tok = swap("muse_glimmer")
    with pytest.raises(ChatToolsUnsupported):
        resolve_native(tok)
    tok.response_template = {
        "defaults": {"role": "assistant"},
        "start_anchor": "<|start|>assistant",
        "fields": {
            "reasoning_content": {"open": " to=self<|message|>",
                                  "close_pattern": r"<\|eom\|>(?:<\|start\|>assistant)?"},
            "tool_calls": {
                "open_pattern": r' to=(?P<name>[^<\s]+)<\|message\|><atem:function_calls>\s*'
                                r'<atem:invoke name="[^"]*">\s*',
                "close_pattern": r"</atem:invoke>\s*</atem:function_calls>"
                                 r"(?:<\|eom\|>(?:<\|start\|>assistant)?|<\|eot\|>)?",
                "repeats": True,
                "content": "xml-inline",
                "content_args": {
                    "tag_pattern": r'<atem:parameter name="(?P<key>[^"]+)">(?P<value>.*?)</atem:parameter>',
                    "value_parser": {"name": "text"}},
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
            },
            "content": {"open": " to=user<|message|>", "close_pattern": r"<\|eot\|>\s*|$"},
        },
    }
    try:
        native = resolve_native(tok)
        assert native.grammar.source == "tokenizer" and native.grammar.reasoning_key == "reasoning_content"
        for kind in ("one", "two", "types", "no_call"):
            _round_trip(tok, "muse_glimmer", kind, native)
    finally:
        del tok.response_template


def test_a_copy_of_a_known_format_is_read_by_its_parser(swap):
    """DiffusionGemma's template writes Gemma 4's format; TRL maps no parser to it, the probe finds one."""
    grammar = native_grammar(swap("diffusion_gemma"))
    assert grammar.source == "like:gemma4" and grammar.name.startswith("native_like_gemma4_")


def test_a_completion_cut_at_its_end_of_turn_token_still_closes_its_call(swap):
    """Llama 3.1 closes a call with <|eot_id|>, the token generation stops at: the decoder puts it back."""
    grammar = native_grammar(swap("llama3_1"))
    answer = grammar.render([ToolCall("get_weather", {"city": "Paris"})], None)
    assert answer == '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    assert grammar.decode(answer, "strict").calls == [ToolCall("get_weather", {"city": "Paris"})]
    assert grammar.decode(answer + "<|eot_id|>", "strict").calls == grammar.decode(answer, "strict").calls
    assert grammar.decode("I cannot help with that.", "strict") == grammar.decode(
        "I cannot help with that.<|eot_id|>", "strict")


def test_strict_refuses_an_unreadable_call_and_a_second_reasoning_block(swap):
    grammar = native_grammar(swap("qwen3"))
    broken = "<think>r</think>\n<tool_call>\n{not json}\n</tool_call>"
    assert not grammar.decode(broken, "strict").format_ok
    xml = native_grammar(swap("qwen3_5_think"))
    garbage = "r\n</think>\n\n<tool_call>\nnot a function\n</tool_call>"
    assert xml.decode(garbage, "substring").format_ok and xml.decode(garbage, "substring").calls == []
    p = xml.decode(garbage, "strict")
    assert not p.format_ok and "'<tool_call>' outside a readable call" in p.error
    twice = "<think>a</think><think>b</think>" + grammar.render([ToolCall("ping", {})], None)
    assert not grammar.decode(twice, "strict").format_ok
    assert grammar.decode(twice, "substring").format_ok


def test_history_carries_reasoning_under_the_key_the_template_reads(swap):
    sample = Sample(id="h", source="unit", category="multi_step", tools=TOOLS, answer=[], messages=[
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "", "reasoning": "earlier thought",
         "tool_calls": [{"name": "ping", "arguments": {}}]},
        {"role": "tool", "name": "ping", "content": "pong"},
    ])
    turn = render_prompt(sample, resolve_native(swap("gptoss")))[1]
    assert turn["thinking"] == "earlier thought" and turn["content"] == ""
    turn = render_prompt(sample, resolve_native(swap("qwen2_5")))[1]  # it writes no reasoning: none
    assert "reasoning_content" not in turn and turn["content"] == "" and turn["tool_calls"]


def test_trl_training_template_is_offered_where_the_stock_template_drops_reasoning(swap):
    tok = swap("qwen3")
    stock = resolve_native(tok)
    with pytest.raises(ReasoningHistoryLost, match=r"qwen3_training\.jinja"):
        check_history_reasoning(tok, stock, keep_reasoning=True, history="messages")
    with pytest.raises(UnresolvedTemplate):  # the check needs the format the model answers in
        check_history_reasoning(tok, "native", keep_reasoning=True, history="messages")
    variant = use_training_chat_template(tok)
    assert variant is not None and variant.grammar.name == "native_qwen3_training"
    assert check_history_reasoning(tok, variant, keep_reasoning=True, history="messages")
    assert stock.grammar.name == "native_qwen3"  # the value resolved before the switch is unchanged
    _round_trip(tok, "qwen3_training", "two", variant)
    assert use_training_chat_template(tok) is None  # already the variant: nothing to switch to
    tok = swap("qwen2_5")  # keeps no reasoning at all: nothing is lost, nothing is offered
    assert check_history_reasoning(tok, resolve_native(tok)) and use_training_chat_template(tok) is None


def test_with_tools_types_bare_text_values_by_the_schema(swap):
    grammar = native_grammar(swap("qwen3_5_think"))
    answer = grammar.render(ANSWERS["zip"], None)
    assert "<parameter=zip>\n75001\n</parameter>" in answer
    assert grammar.decode(answer, "strict").calls == [ToolCall("lookup", {"zip": 75001})]
    tools = prompt_tools(_sample("zip"), "native")  # the tools need no resolved format
    assert grammar.with_tools(tools).decode(answer, "strict").calls == ANSWERS["zip"]
    assert grammar.with_tools(None) is grammar and grammar_with_tools(get_template("tool_n1").grammar, tools)


def test_the_gold_self_check_reports_answers_a_format_cannot_carry(swap):
    from tooltune.data.validate import check_samples

    native = resolve_native(swap("llama3_1"))
    report = check_samples([_sample("one"), _sample("two"), _sample("no_call")], native)
    assert (report.total, report.passed) == (3, 2)
    failure = report.failures[0]
    assert failure["id"] == "two" and "cannot write this answer" in failure["completion"]
