"""The ``native`` template (the model's own tool format): sample -> chat template with ``tools=`` (the tiny
tokenizer's tool-aware template) -> gold hermes answer -> parse -> exact match; the refusal of chat
templates without tool support; the tiny template unchanged for conversations without tools; the gold
self-check of real sources under ``native``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooltune.config import ConfigError
from tooltune.data.sources import RecordError, get_source
from tooltune.data.synthetic.quickstart_task import build_splits
from tooltune.data.validate import check_samples
from tooltune.experiment.config import QuickstartConfig
from tooltune.matching import calls_match, exact_match
from tooltune.models import CHAT_TEMPLATE
from tooltune.parsing import parse_completion
from tooltune.prompts import (
    CHAT_TOOLS_COLUMN,
    ChatToolsUnsupported,
    chat_tools,
    get_template,
    grammar_for,
    prompt_tools,
    render_answer,
    render_chat,
    render_prompt,
    render_target,
    resolve_native,
    tool_support_problem,
)
from tooltune.prompts.templates import TOOLRL_NO_CALL_REPLY
from tooltune.schema import Sample, ToolCall
from tooltune.schema.rows import row_tools
from tooltune.training.data import drop_long_prompts, grpo_rows, rows_dataset, sft_rows

W = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
    },
}
T = {
    "name": "book.table",
    "description": "Book a table.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}


def _s(category, answer, messages=None, tools=(W, T), meta=None):
    return Sample(id=category, source="unit", category=category, tools=list(tools), answer=answer,
                  messages=messages or [{"role": "user", "content": "please help"}], meta=meta or {})


HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "weather in Oslo and Rome, then book for 3"},
    {"role": "assistant", "content": "", "reasoning": "first the weather",
     "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}},
                    {"name": "get_weather", "arguments": {"city": "Rome", "unit": "f"}}]},
    {"role": "tool", "name": "get_weather", "content": '{"temp": 3}'},
    {"role": "tool", "name": "get_weather", "content": '{"temp": 21}'},
]
CASES = [
    _s("simple", [{"name": "get_weather", "arguments": {"city": "Austin, TX"}}], tools=[W]),
    _s("parallel", [{"name": "get_weather", "arguments": {"city": "Paris"}},
                    {"name": "book.table", "arguments": {"n": 2}}]),
    _s("irrelevance", []),
    _s("multi_step", [{"name": "book.table", "arguments": {"n": 3}}], messages=HISTORY,
       meta={"reasoning": "now the booking"}),
]

OLD_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- set content = message['content'] if message['content'] is string else '' -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{%- if not content and message['tool_calls'] is defined and message['tool_calls'] -%}"
    "{%- set ns = namespace(calls=[]) -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set f = call['function'] if call['function'] is defined else call -%}"
    "{%- set ns.calls = ns.calls + [{'name': f['name'], 'arguments': f['arguments']}] -%}"
    "{%- endfor -%}"
    "{%- set content = '<tool_call>' + (ns.calls | tojson) + '</tool_call>' -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>assistant\n' -}}"
    "{% generation %}{{- content + '<|im_end|>' -}}{% endgeneration %}"
    "{{- '\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)
"""The tiny tokenizer's chat template before it had tool support (the reference for byte identity)."""

LLAMA31_LIKE = """{%- for m in messages %}<|{{ m.role }}|>
{%- if loop.first and tools %}Use these functions: {% for t in tools %}{{ t | tojson }}{% endfor %}{% endif %}
{%- if m.tool_calls %}{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", "parameters": \
{{ c.function.arguments | tojson }}}{% endfor %}{% else %}{{ m.content }}{% endif %}<|eot|>
{%- endfor %}"""
"""Llama 3.1's way: tools listed, but a call is bare JSON with "parameters" (not a hermes block)."""


NATIVE = resolve_native(CHAT_TEMPLATE)
"""``native`` as the tiny model answers in it (its chat template writes hermes ``<tool_call>`` blocks)."""


@pytest.fixture(scope="module")
def tok(tiny_model_dir: Path):
    from transformers import AutoTokenizer  # deferred: heavy

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.mark.parametrize("sample", CASES, ids=lambda s: s.category)
def test_native_round_trip_through_the_tiny_chat_template(tok, sample):
    messages = render_prompt(sample, NATIVE)
    tools = prompt_tools(sample, NATIVE)
    assert all(t["description"] not in json.dumps(messages) for t in (W, T))  # no tool list in the messages
    prompt = render_chat(tok, messages, tools=tools)
    for t in sample.tools:  # listed by the chat template, in the function-schema form
        assert json.dumps({"type": "function", "function": t.to_dict()}, ensure_ascii=False) in prompt
    answer = render_target(sample, NATIVE)
    full = render_chat(tok, [*messages, {"role": "assistant", "content": answer}], False, tools=tools)
    assert full == prompt + answer + "<|im_end|>\n"  # the answer is what follows the generation prompt
    parsed = parse_completion(answer, grammar_for(NATIVE))
    assert parsed.format_ok, parsed.error
    assert calls_match(parsed.calls, sample.answer) and len(parsed.calls) == len(sample.answer)
    assert exact_match(answer, sample.answer, grammar_for(NATIVE)) == 1.0
    if not sample.answer:  # no call: a plain text reply
        assert answer == TOOLRL_NO_CALL_REPLY and "<tool_call>" not in answer


def test_native_history_is_written_by_the_chat_template_as_the_model_answers():
    sample = CASES[-1]
    messages = render_prompt(sample, NATIVE)
    assert messages[0] == {"role": "system", "content": "Be brief."}  # no tool list in the system text
    earlier = messages[2]
    assert earlier["content"] == "first the weather"
    assert [c["function"] for c in earlier["tool_calls"]] == [
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_weather", "arguments": {"city": "Rome", "unit": "f"}},
    ]
    assert messages[3:] == [{"role": "tool", "name": "get_weather", "content": '{"temp": 3}'},
                            {"role": "tool", "name": "get_weather", "content": '{"temp": 21}'}]
    assert render_prompt(sample, NATIVE, keep_reasoning=False)[2]["content"] == ""


def test_tiny_template_renders_history_and_tool_results_in_hermes_form(tok):
    sample = CASES[-1]
    text = render_chat(tok, render_prompt(sample, NATIVE), tools=prompt_tools(sample, NATIVE))
    earlier = render_answer(
        [ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_weather", {"city": "Rome", "unit": "f"})],
        NATIVE, reasoning="first the weather",
    )
    assert f"<|im_start|>assistant\n{earlier}<|im_end|>\n" in text  # the same text the model writes
    assert ("<|im_start|>user\n<tool_response>\n{\"temp\": 3}\n</tool_response>\n<tool_response>\n"
            "{\"temp\": 21}\n</tool_response><|im_end|>\n") in text
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n<tools>\n")
    assert text.count("<|im_start|>system") == 1


def test_tiny_template_without_tools_is_unchanged(tok):
    conversations = []
    for sample in CASES:
        for template in ("tool_n1", "r2if", "tool_n1_compact", NATIVE):
            for history in ("messages", "context"):
                messages = render_prompt(sample, template, history)
                answer = {"role": "assistant", "content": render_answer(sample.answer, template)}
                conversations += [messages, [*messages, answer]]
    conversations.append([  # an OpenAI-style history, as other callers write it
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "tool", "content": "r"},
    ])
    for conv in conversations:
        for gen in (True, False):
            new = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)
            assert new == tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen,
                                                  chat_template=OLD_TEMPLATE)
        if conv[-1]["role"] == "assistant":
            kw = {"tokenize": True, "return_dict": True, "return_assistant_tokens_mask": True}
            old = tok.apply_chat_template(conv, chat_template=OLD_TEMPLATE, **kw)
            new = tok.apply_chat_template(conv, **kw)
            assert new["input_ids"] == old["input_ids"] and new["assistant_masks"] == old["assistant_masks"]


def test_refuses_a_chat_template_without_tool_support(tok, tiny_model_dir: Path):
    from transformers import AutoTokenizer  # deferred: heavy

    assert resolve_native(tok) == NATIVE  # the tiny template has it
    assert resolve_native(OLD_TEMPLATE, "tool_n1") is get_template("tool_n1")  # it lists the tools itself
    other = AutoTokenizer.from_pretrained(tiny_model_dir)
    other.name_or_path, other.chat_template = "org/no-tools-model", OLD_TEMPLATE
    with pytest.raises(ChatToolsUnsupported, match=(
        r"data.template: 'native' renders the tools with the model's own chat template .* the chat "
        r"template of the tokenizer 'org/no-tools-model' does not list the tools it is given .* "
        r"Pick a template .*tool_n1")) as e:
        resolve_native(other)
    assert isinstance(e.value, ConfigError)  # user-grade: the CLI prints it without a traceback
    other.chat_template = None
    assert "no chat template" in tool_support_problem(other)
    # Llama-like calls, closed by <|eot|> instead of Llama 3.1's <|eot_id|>: no known parser reads them
    assert "no known response parser reads back" in tool_support_problem(LLAMA31_LIKE)
    with pytest.raises(ChatToolsUnsupported, match="controls.template: 'native'.*response parser") as e:
        resolve_native(LLAMA31_LIKE, where="controls.template")
    assert "\n" not in str(e.value)  # one line
    assert "fails on a conversation" in tool_support_problem("{{ raise_exception('no tools here') }}")
    assert get_template("native").answer_grammar is None  # the registered template never changes


def test_the_tiny_template_keeps_the_hermes_grammar(tok):
    """A chat template TRL does not know that writes hermes <tool_call> blocks keeps ``hermes``: binding it
    changes nothing."""
    before = get_template("native")
    resolved = resolve_native(tok)
    assert resolved.grammar is grammar_for("hermes")
    assert resolved.default_reasoning is before.default_reasoning
    assert get_template("native") is before and resolved == resolve_native(None)  # as an endpoint writes it


def test_training_rows_carry_the_chat_tools(tok):
    rows = grpo_rows(CASES, NATIVE)
    assert [row_tools(r) for r in rows] == [chat_tools(s.tools) for s in CASES]
    assert all(isinstance(r[CHAT_TOOLS_COLUMN], str) for r in rows)  # JSON keeps the Arrow schema fixed
    srows = sft_rows(CASES, NATIVE)
    assert [row_tools(r) for r in srows] == [chat_tools(s.tools) for s in CASES]
    assert srows[2]["completion"][0]["content"] == TOOLRL_NO_CALL_REPLY
    assert CHAT_TOOLS_COLUMN not in grpo_rows(CASES, "tool_n1")[0]
    assert prompt_tools(CASES[0], "tool_n1") is None and get_template("native").chat_tools
    # a Dataset gives the history's calls back exactly (Arrow alone would merge all arguments into one
    # struct, absent keys as null, and refuse an argument whose type differs between rows)
    other = _s("multi_step", [], messages=[HISTORY[1], {**HISTORY[2], "tool_calls": [
        {"name": "book.table", "arguments": {"n": "three"}}]}, HISTORY[3]])
    for built in (rows, srows, grpo_rows([*CASES, other], NATIVE)):
        assert rows_dataset(built).to_list() == built
    assert "Json" not in repr(rows_dataset(grpo_rows(CASES, "tool_n1")).features)  # plain rows: plain Arrow
    assert "Json" in repr(rows_dataset(rows).features)
    # the length filter measures the prompt with its tools (the tool list is most of it)
    n = len(tok.apply_chat_template(rows[0]["prompt"], tools=row_tools(rows[0]), add_generation_prompt=True,
                                    tokenize=True, return_dict=True)["input_ids"])
    assert drop_long_prompts(grpo_rows(CASES[:1], NATIVE), tok, n)[1] == 0
    assert drop_long_prompts(grpo_rows(CASES[:1], NATIVE), tok, n - 1)[1] == 1


# --- gold self-check under native ---------------------------------------------------------------------


def _convert_all(name: str, spec: str) -> list[Sample]:
    src = get_source(name)
    samples = []
    for rec in src.read(spec):
        try:
            samples.extend(x for x in src.convert(rec.data, rec.position) if isinstance(x, Sample))
        except RecordError:
            pass
    return samples


def _gold_ok(samples: list[Sample], tok) -> None:
    assert samples
    report = check_samples(samples, NATIVE)
    assert report.ok, report.failures[:3]
    for s in samples[:: max(1, len(samples) // 50)]:  # and the prompts render through the chat template
        assert render_chat(tok, render_prompt(s, NATIVE), tools=prompt_tools(s, NATIVE))


def test_gold_self_check_native_quickstart(tok):
    splits = build_splits(QuickstartConfig().task)
    _gold_ok([s for v in splits.values() for s in v], tok)


def test_gold_self_check_native_bfcl(tok):
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")
    _gold_ok(_convert_all("bfcl", "package"), tok)


def test_gold_self_check_native_acebench_and_apibank(tok, shared_data_dir: Path):
    _gold_ok(_convert_all("acebench", str(shared_data_dir / "acebench")), tok)
    for level in ("level-1-api.json", "level-2-api.json"):
        _gold_ok(_convert_all("apibank", str(shared_data_dir / "apibank" / level)), tok)


def test_train_refuses_a_tokenizer_without_tool_support_in_one_line(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    import shutil

    from tooltune import cli
    from tooltune.schema import write_jsonl

    model = tmp_path / "no-tools-model"
    shutil.copytree(tiny_model_dir, model)
    (model / "chat_template.jinja").write_text(OLD_TEMPLATE, encoding="utf-8")
    data = tmp_path / "train.jsonl"
    write_jsonl(CASES, str(data))
    argv = ["train", "--model.name_or_path", model, "--data.train", data, "--data.template", "native",
            "--run.output_dir", tmp_path / "run", "--run.device", "cpu", "--grpo.max_steps", "1"]
    assert cli.main([str(a) for a in argv]) == cli.EXIT_USER_ERROR == 2
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("tooltune ")]  # besides progress bars
    assert "Traceback" not in out + err and len(lines) == 1, err
    assert lines[0].startswith("tooltune train: data.template: 'native' renders the tools")
    assert f"tokenizer {str(model)!r}" in lines[0] and "does not list the tools it is given" in lines[0]


def test_two_models_formats_in_one_process_do_not_interfere(tiny_model_dir: Path):
    """The tiny model (hermes blocks) and a Qwen3 template (its own parser) resolved in one process: each
    value renders, parses and scores as it does alone, whatever was resolved or used in between."""
    import importlib.util

    from transformers import AutoTokenizer  # deferred: heavy

    from tooltune.rewards import get_reward

    qwen_source = (Path(importlib.util.find_spec("trl").origin).parent / "chat_templates" / "qwen3.jinja")
    tiny, qwen = AutoTokenizer.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)
    qwen.chat_template = qwen_source.read_text(encoding="utf-8")
    sample = CASES[1]
    alone = render_target(sample, resolve_native(tiny))  # before any other format exists
    first, second = resolve_native(tiny), resolve_native(qwen)
    assert first.grammar.name == "hermes" and second.grammar.name == "native_qwen3"
    assert get_template("native").answer_grammar is None  # nothing registered changed
    texts = {}
    for native in (second, first, second, first):  # interleaved uses
        texts.setdefault(native.grammar.name, set()).add(render_target(sample, native))
        history = render_prompt(CASES[-1], native)[2]
        assert ("reasoning_content" in history) == (native is second)  # each its own reasoning key
    assert texts["hermes"] == {alone} and len(texts["native_qwen3"]) == 1
    qwen_text = texts["native_qwen3"].pop()
    assert qwen_text != alone
    answer = json.dumps([c.to_dict() for c in sample.answer])
    for native, text in ((first, alone), (second, qwen_text)):
        reward = get_reward("binary", template=native)
        assert reward(text, answer) == 1.0 and calls_match(parse_completion(text, native.grammar).calls,
                                                           sample.answer)
    # the model's own grammar holds Qwen3's parser, not hermes, and is carried by the reward as a value
    assert get_reward("binary", template=second).grammar is second.grammar
    assert get_reward("binary", template=first).grammar == "hermes"
