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
  the Arrow schema fixed whatever the parameters look like); `row_tools` reads it back.
- `render_chat(chat_template, messages, tools=…)` (`tooltune.prompts.chat_template`) renders with them.

Answers are parsed with the ``hermes`` grammar, the form the Qwen templates write: one
``<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>`` block per call, free text (or a
``<think>`` block) elsewhere, and a plain text reply when no call is made.

`check_tool_support` refuses a chat template that cannot carry this: one that does not list the tools
it is given, writes calls in another form (Llama 3.1 writes bare JSON with ``parameters``), or drops
tool calls or tool results. It probes the template with a made-up tool and conversation and raises
`ChatToolsUnsupported`, a user-grade configuration error naming the tokenizer and the way out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2

from tooltune.config import ConfigError
from tooltune.parsing import get_grammar, parse_completion
from tooltune.prompts.chat_template import render_chat
from tooltune.prompts.controls import PromptLike, template_of
from tooltune.prompts.templates import PromptTemplate, get_template
from tooltune.schema import Sample, ToolCall, ToolSpec

CHAT_TOOLS_COLUMN = "chat_tools"
"""The training-row column holding `prompt_tools` as a JSON string (only under a chat-tools template)."""

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


def row_tools(row: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The chat-template tools of a training row (its `CHAT_TOOLS_COLUMN`, JSON or a list), None without."""
    tools = row.get(CHAT_TOOLS_COLUMN)
    if isinstance(tools, str):
        tools = json.loads(tools)
    return list(tools) if tools else None


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


def tool_support_problem(chat_template: Any) -> str | None:
    """What keeps `chat_template` (a tokenizer or a Jinja source) from carrying the ``native`` format,
    as the end of a sentence ("the chat template …"), or None when it carries it.

    It must list the tools it is given, write an assistant turn's ``tool_calls`` as hermes
    ``<tool_call>`` JSON blocks and keep the tool results."""
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
        return "is missing (the tokenizer has no chat template)"
    try:
        listed = render_chat(chat_template, conversation[:1], tools=probe)
        history = render_chat(chat_template, conversation, tools=probe)
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError) as e:
        return f"fails on a conversation with tools and tool calls ({type(e).__name__}: {e})"
    if _PROBE_DESCRIPTION not in listed:
        return "does not list the tools it is given (it has no tool support)"
    if [_PROBE_CALL] not in _tool_call_blocks(history):
        return ("does not write an assistant turn's tool calls as hermes <tool_call> JSON blocks, "
                "the format the native template parses")
    if _PROBE_RESULT not in history:
        return "drops tool results"
    return None


def check_tool_support(chat_template: Any, template: str = "native", where: str = "data.template") -> None:
    """Raise `ChatToolsUnsupported` when `template` sends its tools to the chat template and
    `chat_template` (a tokenizer or a Jinja source) cannot render them (`tool_support_problem`); nothing
    to check under other templates. `where` names the setting in the message."""
    if not get_template(template, where).chat_tools:
        return
    problem = tool_support_problem(chat_template)
    if problem is None:
        return
    if isinstance(chat_template, str):
        subject = "the chat template"
    else:
        name = getattr(chat_template, "name_or_path", "")
        subject = f"the chat template of the tokenizer {name!r}" if name else "the tokenizer's chat template"
    raise ChatToolsUnsupported(
        f"{where}: {template!r} renders the tools with the model's own chat template "
        f"(apply_chat_template(..., tools=...)), but {subject} {problem}. "
        "Pick a template that lists the tools in its system text instead (e.g. tool_n1 or "
        "tool_n1_compact), or a model whose chat template writes tool calls as <tool_call> JSON "
        "blocks (Qwen2.5, Qwen3)."
    )
