"""Does a chat template keep the reasoning of earlier assistant turns?

`render_prompt(..., keep_reasoning=True)` writes the data's reasoning into earlier assistant messages,
but the tokenizer's chat template, which turns the messages into text, may drop it again: Qwen3's
stock template splits every assistant turn before the last user message at ``</think>`` and keeps
only what follows. A run that records ``keep_reasoning: true`` with such a template shows the model
no earlier reasoning at all, and its record says otherwise.

`history_reasoning_survives(chat_template, template)` renders a short conversation, whose earlier
assistant turn carries a marker as its reasoning, exactly as `render_prompt` writes it for `template`,
through the chat template, and says whether the marker is still there. `check_history_reasoning` is
the call for training and evaluation code: it does nothing unless reasoning is kept in `messages` history
with a template whose answers carry reasoning (a grammar's reasoning block, or the reasoning field of
a native grammar's chat template), and then raises `ReasoningHistoryLost` (or logs a warning) naming
the fix. Where TRL ships a training variant of the stock template (``qwen3_training.jinja``) that keeps
the reasoning, `training_template_keeping_reasoning` finds it and the message offers it
(`tooltune.prompts.use_training_chat_template` switches a tokenizer to it).

A chat template is a tokenizer (rendered with its own `apply_chat_template`) or the template's Jinja
source, rendered here with jinja2 the way transformers renders it (sandboxed, ``trim_blocks``,
``lstrip_blocks``, loop controls, ``tojson``, ``raise_exception``, and ``{% generation %}`` blocks).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tooltune.prompts.render import render_prompt
from tooltune.prompts.templates import PromptTemplate, get_template
from tooltune.prompts.trl_templates import training_variant
from tooltune.schema import Sample

logger = logging.getLogger(__name__)

PROBE_MARKER = "tooltune-history-reasoning-probe"
"""The reasoning of the probe's earlier assistant turn; no chat template writes it on its own."""


class ReasoningHistoryLost(ValueError):
    """The chat template drops the reasoning that `keep_reasoning` asked to keep."""


class _Generation(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}`` (transformers' assistant-mask marker): renders its body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


def _raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def render_chat(
    chat_template: Any,
    messages: list[dict[str, Any]],
    add_generation_prompt: bool = True,
    tools: list[dict[str, Any]] | None = None,
    source: str | None = None,
) -> str:
    """`messages` as the text the model reads, through a tokenizer's chat template or a template source;
    `tools` (OpenAI-style function schemas) go to the template's ``tools`` variable. `source` renders with
    that template source instead of the tokenizer's own (with the tokenizer's special tokens)."""
    if not isinstance(chat_template, str):
        apply = getattr(chat_template, "apply_chat_template", None)
        if apply is None:
            raise TypeError(
                f"expected a chat template source or a tokenizer, got {type(chat_template).__name__}"
            )
        if source is None and not getattr(chat_template, "chat_template", None):
            raise ValueError("the tokenizer has no chat template")
        extra: dict[str, Any] = {"tools": tools} if tools is not None else {}
        if source is not None:
            extra["chat_template"] = source
        return apply(messages, tokenize=False, add_generation_prompt=add_generation_prompt, **extra)
    return _environment().from_string(source if source is not None else chat_template).render(
        messages=messages, add_generation_prompt=add_generation_prompt, tools=tools, bos_token="",
        eos_token="",
    )


def probe_messages(template: str | PromptTemplate = "tool_n1") -> list[dict[str, str]]:
    """A user turn, an assistant turn (one call, reasoning `PROBE_MARKER`), a second user turn, rendered
    by `render_prompt` in `messages` history with reasoning kept."""
    tool = {"name": "probe_tool", "description": "A probe.",
            "parameters": {"type": "object", "properties": {}}}
    sample = Sample(
        id="reasoning-probe",
        source="probe",
        category="multi_step",
        messages=[
            {"role": "user", "content": "First request."},
            {"role": "assistant", "content": "", "reasoning": PROBE_MARKER,
             "tool_calls": [{"name": "probe_tool", "arguments": {}}]},
            {"role": "user", "content": "Second request."},
        ],
        tools=[tool],
        answer=[],
    )
    return render_prompt(sample, template, history="messages", keep_reasoning=True, system_prompt="{tools}")


def _has_reasoning(template: str | PromptTemplate) -> bool:
    """Whether `template`'s answers carry reasoning: a reasoning block, or (a native grammar) a reasoning
    field its chat template writes."""
    grammar = get_template(template).grammar
    return grammar.reasoning is not None or bool(getattr(grammar, "reasoning_key", None))


def history_reasoning_survives(
    chat_template: Any, template: str | PromptTemplate = "tool_n1", source: str | None = None
) -> bool:
    """Whether an earlier assistant turn's reasoning, written by `render_prompt` for `template`, is still in
    the text `chat_template` (a tokenizer or a Jinja source; `source`: another template source rendered
    with it) makes of the conversation.

    True as well when `template`'s answers carry no reasoning (there is nothing to lose)."""
    if not _has_reasoning(template):
        return True
    return PROBE_MARKER in render_chat(chat_template, probe_messages(template), source=source)


def training_template_keeping_reasoning(
    chat_template: Any, template: str | PromptTemplate
) -> tuple[str, str] | None:
    """(name, source) of TRL's training variant of `chat_template` (``qwen3`` -> ``qwen3_training``) when
    the stock template drops earlier reasoning that `template` keeps, and TRL ships a variant that keeps
    it; None otherwise."""
    stock = chat_template if isinstance(chat_template, str) else getattr(chat_template, "chat_template", None)
    variant = training_variant(stock) if isinstance(stock, str) else None
    if variant is None or history_reasoning_survives(chat_template, template):
        return None
    try:
        kept = history_reasoning_survives(chat_template, template, source=variant[1])
    except Exception:  # the variant fails on the probe conversation: it is not offered
        logger.debug("TRL's %s does not render the reasoning probe", variant[0], exc_info=True)
        return None
    return variant if kept else None


def check_history_reasoning(
    chat_template: Any,
    template: str | PromptTemplate = "tool_n1",
    keep_reasoning: bool = True,
    history: str = "messages",
    on_loss: str = "error",
    where: str = "",
) -> bool:
    """Check that the chat template keeps what `keep_reasoning` keeps; True when nothing is lost.

    Only `messages` history with `keep_reasoning` and a grammar with a reasoning block can lose anything
    (context history writes earlier turns into one user message). A template answered in the model's own
    format is given resolved (`tooltune.prompts.resolve_native`). On a loss, `on_loss="error"` raises
    `ReasoningHistoryLost` and ``"warn"`` logs a warning and returns False; `where` names the caller
    (e.g. a config key) in the message."""
    if on_loss not in ("error", "warn"):
        raise ValueError(f"on_loss must be 'error' or 'warn', got {on_loss!r}")
    if not keep_reasoning or history != "messages" or history_reasoning_survives(chat_template, template):
        return True
    tags = get_template(template).grammar.reasoning
    what = f"{tags[0]}…{tags[1]} reasoning" if tags else "reasoning"
    variant = training_template_keeping_reasoning(chat_template, template)
    offer = (f"; TRL ships a training variant of this chat template that keeps it ({variant[0]}.jinja, "
             "tooltune.prompts.use_training_chat_template)" if variant else "")
    message = (
        f"{where + ': ' if where else ''}keep_reasoning is set with messages history, but the chat template "
        f"removes the {what} of assistant turns before the last user message (as Qwen3's stock template "
        "does), so the model would see none of it. Set keep_reasoning to false to record what the model "
        "sees, use history: context (earlier turns inside one user message), or use a chat template that "
        f"keeps earlier reasoning{offer}."
    )
    if on_loss == "error":
        raise ReasoningHistoryLost(message)
    logger.warning("%s", message)
    return False
