"""The model's own tool format: tools rendered by the tokenizer's chat template (the ``native`` template).

Instruction-tuned models such as Qwen2.5 and Qwen3 were trained on one tool format, written by their
chat template: the tools, given as OpenAI-style function schemas to
``tokenizer.apply_chat_template(messages, tools=…)``, are listed in the system turn, earlier calls are
the assistant messages' ``tool_calls`` and tool results are ``tool`` messages. A template whose
`PromptTemplate.chat_tools` is set (``native``) leaves the tools out of its system text
(`tooltune.prompts.render.render_prompt`) and hands them to whoever applies the chat template:

- `prompt_tools(sample, template)`: the ``tools=`` argument for `sample` (None under other templates);
  `chat_tools` turns tool specs into the schemas.
- Training rows carry them as the JSON string column `CHAT_TOOLS_COLUMN` (``chat_tools``; JSON keeps
  the Arrow schema fixed whatever the parameters look like); `tooltune.schema.rows`, which owns the row
  format, reads it back (`row_tools`).
- `render_chat(chat_template, messages, tools=…)` (`tooltune.prompts.chat_template`) renders with them.

Answers follow the model's own format: `resolve_native(tokenizer)` checks the chat template and returns
the template as a value that holds `native_template_grammar(tokenizer)`, the grammar its answers are
parsed and rendered with. Whoever resolves it (the trainer, the evaluation runner) passes that value to
rendering, parsing and rewards; the registered ``native`` template holds no grammar, so two models in one
process never share one:

- a chat template with a response parser of its own (the tokenizer's ``response_template``, or TRL's for
  a template TRL knows or its training variant: `tooltune.prompts.native_format`) gets a native grammar
  whose decoder is that parser under tooltune's limits and whose renderer is the chat template itself;
- an unknown template that writes hermes ``<tool_call>`` JSON blocks (the tiny model's) gets the
  ``hermes`` grammar, as does a chat template an endpoint applies (`resolve_native(None)`: structured
  calls come back as hermes blocks);
- any other is read by the first of TRL's response templates that reads back its answers.

A chat template that does not list the tools it is given, drops tool calls or tool results, fails on a
conversation with tools, or writes calls no known parser reads back is refused with
`ChatToolsUnsupported`, a user-grade configuration error (one line) naming the tokenizer and the way out.
Where a stock template drops earlier reasoning and TRL ships a training variant that keeps it,
`use_training_chat_template` switches the tokenizer to that variant.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2

from tooltune.config import ConfigError
from tooltune.parsing import Grammar, get_grammar, parse_completion
from tooltune.prompts.chat_template import render_chat, training_template_keeping_reasoning
from tooltune.prompts.controls import PromptLike, template_of
from tooltune.prompts.native_format import NativeFormatError, native_grammar, template_source
from tooltune.prompts.templates import TEMPLATES, PromptTemplate, get_template
from tooltune.prompts.trl_templates import trl_template_name
from tooltune.schema import Sample, ToolCall, ToolSpec
from tooltune.schema.rows import CHAT_TOOLS

logger = logging.getLogger(__name__)

CHAT_TOOLS_COLUMN = CHAT_TOOLS
"""The training-row column holding `prompt_tools` as a JSON string (only under a chat-tools template;
`tooltune.schema.rows` owns the row format)."""

_PROBE_NAME = "tooltune_probe_tool"
_PROBE_DESCRIPTION = "tooltune-probe-description"
_PROBE_CALL = ToolCall(_PROBE_NAME, {"tooltune_probe_param": "tooltune-probe-value"})
_PROBE_RESULT = "tooltune-probe-result"


class ChatToolsUnsupported(ConfigError):
    """The tokenizer's chat template cannot render the tools and tool calls a chat-tools template needs."""


def chat_tools(tools: Sequence[ToolSpec | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tools as OpenAI-style function schemas, ``{"type": "function", "function": {"name",
    "description", "parameters"}}``: what ``apply_chat_template(tools=…)`` takes."""
    return [{"type": "function", "function": ToolSpec.from_dict(t).to_dict()} for t in tools]


def prompt_tools(sample: Sample, template: PromptLike | PromptTemplate) -> list[dict[str, Any]] | None:
    """The ``tools=`` argument of the chat template for `sample` rendered with `template` (a template
    name or object, or prompt controls): its tools as `chat_tools` under a template whose tools go to
    the chat template, else None (the tools are in the system text). A sample without tools gives None
    too (Llama-style templates write tool boilerplate even for an empty list)."""
    if not template_of(template).chat_tools or not sample.tools:
        return None
    return chat_tools(sample.tools)


def prompt_tools_json(sample: Sample, template: PromptLike | PromptTemplate) -> str | None:
    """`prompt_tools` as the JSON string of the `CHAT_TOOLS_COLUMN` column (None when there are none)."""
    tools = prompt_tools(sample, template)
    return None if tools is None else json.dumps(tools, ensure_ascii=False)


def _tool_call_blocks(text: str) -> list[list[ToolCall]]:
    """The calls of every ``<tool_call>`` block of `text` that decodes under the hermes grammar."""
    grammar = get_grammar("hermes")
    open_tag, close_tag = grammar.call or ("", "")
    found, pos = [], 0
    while (start := text.find(open_tag, pos)) >= 0:
        end = text.find(close_tag, start)
        if end < 0:
            break
        parsed = parse_completion(text[start : end + len(close_tag)], grammar)
        if parsed.calls:
            found.append(parsed.calls)
        pos = end + len(close_tag)
    return found


def _probe_problem(chat_template: Any) -> tuple[str | None, str]:
    """(what keeps `chat_template` from carrying tools at all, or None; the probe conversation's text)."""
    probe = chat_tools([ToolSpec(_PROBE_NAME, _PROBE_DESCRIPTION, {
        "type": "object", "properties": {"tooltune_probe_param": {"type": "string"}},
        "required": ["tooltune_probe_param"]})])
    conversation = [
        {"role": "user", "content": "Probe request."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": _PROBE_CALL.name, "arguments": _PROBE_CALL.arguments}}
        ]},
        {"role": "tool", "name": _PROBE_NAME, "content": _PROBE_RESULT},
    ]
    if not isinstance(chat_template, str) and not getattr(chat_template, "chat_template", None):
        return "is missing (the tokenizer has no chat template)", ""
    try:
        listed = render_chat(chat_template, conversation[:1], tools=probe)
        history = render_chat(chat_template, conversation, tools=probe)
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError) as e:
        return f"fails on a conversation with tools and tool calls ({type(e).__name__}: {e})", ""
    if _PROBE_DESCRIPTION not in listed:
        return "does not list the tools it is given (the model would never see them)", history
    if _PROBE_CALL.name not in history or "tooltune-probe-value" not in history:
        return "drops the tool calls of assistant turns (it has no tool support)", history
    if _PROBE_RESULT not in history:
        return "drops tool results", history
    return None, history


def _grammar_key(chat_template: Any, source: str) -> tuple[Any, ...]:
    """What a native grammar built for `chat_template` depends on besides its source."""
    if isinstance(chat_template, str):
        return (source,)
    own = getattr(chat_template, "response_template", None)
    return (source, type(chat_template).__name__, getattr(chat_template, "bos_token", None),
            getattr(chat_template, "eos_token", None), json.dumps(own, sort_keys=True, default=str))


_GRAMMARS: dict[tuple[Any, ...], Grammar | str] = {}
"""Native grammars already built (or why none fits), by `_grammar_key`."""


def native_template_grammar(chat_template: Any) -> Grammar:
    """The grammar ``native`` answers are parsed and rendered with under `chat_template` (a tokenizer or
    a Jinja source), or `NativeFormatError` saying why there is none.

    The model's own response parser wins (`native_grammar`: the tokenizer's ``response_template``, or
    TRL's for a chat template TRL knows, or its training variant); a template TRL does not know that
    writes hermes ``<tool_call>`` JSON blocks (the tiny model's, a Qwen-style custom template) keeps the
    ``hermes`` grammar; any other is read by the first of TRL's response templates that reads back its
    answers."""
    problem, history = _probe_problem(chat_template)
    if problem is not None:
        raise NativeFormatError(problem)
    source = template_source(chat_template) or ""
    key = _grammar_key(chat_template, source)
    if key not in _GRAMMARS:
        try:
            if _own_parser(chat_template, source) or [_PROBE_CALL] not in _tool_call_blocks(history):
                _GRAMMARS[key] = native_grammar(chat_template)
            else:
                _GRAMMARS[key] = get_grammar("hermes")
        except NativeFormatError as e:
            _GRAMMARS[key] = str(e)
    found = _GRAMMARS[key]
    if isinstance(found, str):
        raise NativeFormatError(found)
    return found


def _own_parser(chat_template: Any, source: str) -> bool:
    """Whether the tokenizer ships a response template or TRL maps its chat template to one."""
    if isinstance(getattr(chat_template, "response_template", None), dict):
        return True
    return trl_template_name(source) is not None


def tool_support_problem(chat_template: Any) -> str | None:
    """What keeps `chat_template` (a tokenizer or a Jinja source) from carrying the ``native`` format,
    as the end of a sentence ("the chat template …"), or None when it carries it.

    It must list the tools it is given, write an assistant turn's ``tool_calls``, keep the tool results,
    and write calls that a known response parser reads back (`native_template_grammar`)."""
    try:
        native_template_grammar(chat_template)
    except NativeFormatError as e:
        return str(e)
    return None


SERVED_GRAMMAR = "hermes"
"""The grammar of a chat-tools template whose chat template is applied by a server (an OpenAI-compatible
endpoint, verl): structured calls come back written as hermes ``<tool_call>`` blocks."""


def _with_grammar(tpl: PromptTemplate, grammar: Grammar) -> PromptTemplate:
    """`tpl` holding `grammar`; a model's own grammar writes its own no-call reply and reasoning, so the
    template's default reasoning is kept only for the hermes grammar."""
    keep = grammar == get_grammar(SERVED_GRAMMAR)
    reasoning = tpl.default_reasoning if keep else None
    return dataclasses.replace(tpl, answer_grammar=grammar, default_reasoning=reasoning)


def resolve_native(
    chat_template: Any, template: str | PromptTemplate = "native", where: str = "data.template"
) -> PromptTemplate:
    """The template `template` as it answers under `chat_template` (a tokenizer or a Jinja source; None:
    a chat template an endpoint applies, read as ``hermes``).

    A template whose tools go to the chat template gets the chat template's own format
    (`native_template_grammar`) after checking that the chat template carries the tools; any other
    template (and a template value already resolved) is returned as it is. Raises
    `ChatToolsUnsupported` (one line) when the chat template cannot carry the format; `where` names the
    setting in the message."""
    tpl = get_template(template, where)
    if not tpl.chat_tools or tpl.resolved:
        return tpl
    if chat_template is None:
        return _with_grammar(tpl, get_grammar(SERVED_GRAMMAR))
    try:
        return _with_grammar(tpl, native_template_grammar(chat_template))
    except NativeFormatError as e:
        problem = str(e)
    if isinstance(chat_template, str):
        subject = "the chat template"
    else:
        name = getattr(chat_template, "name_or_path", "")
        subject = f"the chat template of the tokenizer {name!r}" if name else "the tokenizer's chat template"
    raise ChatToolsUnsupported(
        f"{where}: {tpl.name!r} renders the tools with the model's own chat template "
        f"(apply_chat_template(..., tools=...)), but {subject} {problem}. "
        "Pick a template that lists the tools in its system text instead (e.g. tool_n1 or "
        "tool_n1_compact), or a model whose chat template writes tool calls in a format a response "
        "parser reads (Qwen2.5/3/3.5/3.6, Llama 3.1/3.2, gpt-oss, GLM-4 MoE, Nemotron 3, LFM2.5, Gemma 4)."
    )


def without_chat_template(
    template: str | PromptTemplate | Grammar, where: str = "template"
) -> PromptTemplate | Grammar | str:
    """`template` where no model's chat template is at hand (the data commands, verl's reward process, an
    endpoint that applies its own): a registered template as `resolve_native(None, …)` resolves it
    (``hermes`` for the model's own format); a grammar or a grammar's name as it is."""
    if isinstance(template, Grammar) or (isinstance(template, str) and template not in TEMPLATES
                                         and ":" not in template):
        return template
    return resolve_native(None, template, where)


def use_training_chat_template(
    tokenizer: Any, template: str | PromptTemplate = "native", where: str = "data.template"
) -> PromptTemplate | None:
    """Switch `tokenizer` to TRL's training variant of its chat template (``qwen3`` -> ``qwen3_training``)
    when the stock template drops the earlier reasoning `template` keeps and TRL ships a variant that
    keeps it (`training_template_keeping_reasoning`). Returns `template` resolved against the variant
    (`resolve_native`, which probes its answers again): a template resolved against the stock chat
    template no longer fits the tokenizer. None (and nothing changed) when there is no variant.
    Besides keeping earlier reasoning, TRL's variants are prefix-preserving and mark assistant tokens
    for assistant-only loss."""
    variant = training_template_keeping_reasoning(tokenizer, resolve_native(tokenizer, template, where))
    if variant is None:
        return None
    name, source = variant
    tokenizer.chat_template = source
    resolved = resolve_native(tokenizer, get_template(template, where).name, where)
    logger.info("chat template switched to TRL's %s.jinja, which keeps earlier reasoning", name)
    return resolved
