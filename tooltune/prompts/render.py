"""Render a `Sample` into chat messages under the evaluation controls of the efficiency paper.

arXiv 2606.00135 shows that multi-turn scores move with how history is serialized, so both forms
are first-class and every caller states its choice:
- ``messages``: each earlier turn keeps its role; earlier assistant calls are rendered in the
  template's grammar and tool results are ``tool`` messages, for the tokenizer's chat template. Under
  a template whose tools go to the chat template (``native``), earlier calls are OpenAI-style
  ``tool_calls`` of the assistant message instead, and the chat template writes them itself.
- ``context``: the whole history is written out inside one user turn.
``keep_reasoning`` keeps or drops the reasoning of earlier assistant turns (Qwen3 drops it). Kept
reasoning is only ever the data's own (an assistant message's ``reasoning``): an earlier turn without
one is rendered as its call block alone, exactly as with ``keep_reasoning=False``, never with an
invented reasoning or an empty reasoning block. Only `render_target` (the SFT target, the turn the
model learns to write) fills a missing reasoning with the template's default one.

A chat template may still drop kept reasoning when it renders the messages (Qwen3's stock template
strips ``<think>…</think>`` from assistant turns before the last user message):
`tooltune.prompts.chat_template.check_history_reasoning` tells.

The choices come as one `PromptControls` (`tooltune.prompts.controls`), resolved once per batch
(`PromptControls.resolve`); `render_prompt` also keeps its keyword form (a template name, ``history``,
``keep_reasoning`` and the system text itself).
"""

from __future__ import annotations

from typing import Any

from tooltune.parsing import Grammar
from tooltune.prompts.controls import HISTORY_MODES, PromptControls, ResolvedPrompt, as_prompt, check_history
from tooltune.prompts.templates import PromptTemplate, _clean_reasoning, get_template, render_answer
from tooltune.schema import Sample, calls_from_any

__all__ = ["HISTORY_MODES", "render_prompt", "render_target"]


def _assistant_text(msg: dict[str, Any], template: PromptTemplate, keep_reasoning: bool) -> str:
    """An earlier assistant turn: its calls in the template's grammar, with its own reasoning when it has
    one and `keep_reasoning` is set, else the call block alone (no reasoning is written for it)."""
    calls = calls_from_any(msg.get("tool_calls") or [])
    if not calls and not msg.get("tool_calls"):
        return msg.get("content", "")  # a plain text reply
    reasoning = msg.get("reasoning") if keep_reasoning else None
    return render_answer(calls, template, reasoning=reasoning if isinstance(reasoning, str) else None,
                         include_reasoning=keep_reasoning, fill_reasoning=False)


def _tool_call_message(msg: dict[str, Any], keep_reasoning: bool, grammar: Grammar) -> dict[str, Any]:
    """An earlier assistant turn for a chat template that writes calls itself: its calls as OpenAI-style
    ``tool_calls`` and, when `keep_reasoning` is set, its own reasoning: under the key a native grammar's
    chat template reads it from (`NativeGrammar.reasoning_key`, e.g. ``reasoning_content``; none when
    the template writes no reasoning), else (``hermes``) as the content."""
    calls = calls_from_any(msg.get("tool_calls") or [])
    if not calls and not msg.get("tool_calls"):
        return {"role": "assistant", "content": msg.get("content", "")}  # a plain text reply
    reasoning = msg.get("reasoning") if keep_reasoning else None
    text = _clean_reasoning(reasoning) if isinstance(reasoning, str) else ""
    native = hasattr(grammar, "reasoning_key")
    out: dict[str, Any] = {"role": "assistant", "content": "" if native else text}
    if native and grammar.reasoning_key and text:  # type: ignore[attr-defined]
        out[grammar.reasoning_key] = text  # type: ignore[attr-defined]
    out["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                         for c in calls]
    return out


def _history(sample: Sample) -> tuple[list[str], list[dict[str, Any]]]:
    systems = [m["content"] for m in sample.messages if m["role"] == "system" and m["content"].strip()]
    return systems, [m for m in sample.messages if m["role"] != "system"]


def _prompt(
    prompt: str | PromptTemplate | PromptControls | ResolvedPrompt,
    history: str | None,
    keep_reasoning: bool | None,
    system_prompt: str | None,
) -> ResolvedPrompt:
    """The resolved controls of a `render_prompt` call, in either of its two forms."""
    if not isinstance(prompt, (str, PromptTemplate)):
        if (history, keep_reasoning, system_prompt) != (None, None, None):
            raise TypeError("render_prompt: give history, keep_reasoning and system_prompt inside the "
                            "PromptControls, not next to it")
        return as_prompt(prompt)
    template = get_template(prompt)
    return ResolvedPrompt(template, "messages" if history is None else history,
                          True if keep_reasoning is None else keep_reasoning, system_prompt,
                          prompt if isinstance(prompt, str) else template.name)


def render_prompt(
    sample: Sample,
    template: str | PromptTemplate | PromptControls | ResolvedPrompt = "tool_n1",
    history: str | None = None,
    keep_reasoning: bool | None = None,
    system_prompt: str | None = None,
) -> list[dict[str, Any]]:
    """Chat messages (system first, when there is system text) that ask the model for `sample`'s answer.

    `template` is a `PromptControls` (or its `resolve()`d form), or a template (a name or a value) with
    the keyword form: `history` ("messages"), `keep_reasoning` (True) and `system_prompt`, the system
    text itself (None = the template's own). The system text replaces the template's (a system-prompt
    variant under evaluation); a ``{tools}`` placeholder in it receives the tool list. A sample's own system
    messages are appended to it. A template whose tools go to the chat template
    (`PromptTemplate.chat_tools`) leaves them out of the messages: `tooltune.prompts.native.prompt_tools`
    gives them to whoever applies the chat template.
    """
    p = _prompt(template, history, keep_reasoning, system_prompt)
    history, keep_reasoning, tpl = p.history, p.keep_reasoning, p.template
    check_history(history)
    if history not in HISTORY_MODES:
        raise ValueError(f"unknown history mode {history!r}; expected one of {HISTORY_MODES}")
    systems, turns = _history(sample)
    system = "\n\n".join(t for t in (tpl.system_prompt(sample.tools, p.system_prompt), *systems) if t)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    if history == "messages":
        for m in turns:
            if m["role"] == "assistant" and tpl.chat_tools:
                messages.append(_tool_call_message(m, keep_reasoning, tpl.grammar))
            elif m["role"] == "assistant":
                messages.append(
                    {"role": "assistant", "content": _assistant_text(m, tpl, keep_reasoning)}
                )
            elif m["role"] == "tool" and tpl.chat_tools and m.get("name"):
                messages.append({"role": "tool", "name": m["name"], "content": m["content"]})
            elif m["role"] == "tool":
                messages.append({"role": "tool", "content": m["content"]})
            else:
                messages.append({"role": "user", "content": m["content"]})
        return messages
    lines = []
    for m in turns:
        if m["role"] == "assistant":
            lines.append(f"Assistant: {_assistant_text(m, tpl, keep_reasoning)}")
        elif m["role"] == "tool":
            who = f" from {m['name']}" if m.get("name") else ""
            lines.append(f"Tool result{who}: {m['content']}")
        else:
            lines.append(f"User: {m['content']}")
    if len(turns) == 1 and turns[0]["role"] == "user":
        return [*messages, {"role": "user", "content": turns[0]["content"]}]
    body = "The conversation so far:\n" + "\n".join(lines) + "\n\nGive the assistant's next response."
    return [*messages, {"role": "user", "content": body}]


def render_target(
    sample: Sample, template: str | PromptTemplate | Grammar = "tool_n1", reasoning: str | None = None
) -> str:
    """The ground-truth assistant completion for `sample` (SFT target, gold self-check) in `template`
    (a template or a grammar, or the name of one).

    The reasoning is `reasoning`, else the sample's `meta["reasoning"]`, else the template's default
    reasoning (a target must fill the reasoning block its grammar requires)."""
    if reasoning is None:
        reasoning = sample.meta.get("reasoning") if isinstance(sample.meta.get("reasoning"), str) else None
    return render_answer(sample.answer, template, reasoning=reasoning)
