"""The ``native`` grammar of a tokenizer: read by its model's own response parser, written by its chat
template.

`native_grammar(chat_template)` builds a `NativeGrammar` for a tokenizer (or a chat template's Jinja
source). Its decoder is the response parser of the model family (`tooltune.prompts.native_parse`:
transformers' `parse_response` under tooltune's limits) and its renderer is the chat template itself:
an answer is what the template writes for an assistant message with ``tool_calls`` (and the reasoning
under the key the template reads) after the generation prompt, without the end-of-turn text. So SFT
targets, rewards, evaluation and agentic rollouts all follow the model's own format.

The response template comes, in this order, from
1. the tokenizer's own ``response_template`` (recent checkpoints ship one);
2. TRL's, for a chat template TRL recognizes (`trl.chat_template_utils.add_response_schema`: Qwen2.5,
   Qwen3, Qwen3.5/3.6, Llama 3.1/3.2, gpt-oss, GLM-4 MoE, Nemotron 3, LFM2/2.5, Gemma 4), and for TRL's
   training variant of such a template (``*_training.jinja``, which TRL itself does not map);
3. the first of TRL's response templates under which the template's own rendering of a probe answer
   parses back to the probe's calls (a fine-tuned model's copy of a known format).

Every candidate is probed before it is accepted: a made-up call, rendered by the template, must parse
back to the same call, with and without reasoning, and a reply without calls must parse to no call.
The probe also settles what the decoder needs: the end of the generation prompt (Nemotron 3 opens
``<think>`` there), whether a completion cut at its end-of-turn token needs that token back (Llama 3.1
closes a call with ``<|eot_id|>``), and the message key the template reads the reasoning from.
`NativeFormatError` says why no candidate fits.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from tooltune.parsing import NO_CALL_REPLY, Grammar
from tooltune.parsing.render import strip_tags
from tooltune.prompts.chat_template import render_chat
from tooltune.prompts.native_parse import ResponseFormat
from tooltune.prompts.trl_templates import known_templates
from tooltune.schema import Parsed, ToolCall

PROBE_USER = [{"role": "user", "content": "tooltune native probe"}]
"""The conversation every native answer is rendered after (assistant turns do not depend on it)."""
_PROBE_CALLS = [ToolCall("tooltune_probe_tool", {"city": "Paris", "days": 3})]
_REASONING_MARK = "tooltune-native-reasoning-probe"
_CONTENT_MARK = "tooltune-native-content-probe"


class NativeFormatError(ValueError):
    """No response parser reads back what the chat template writes; the message ends a sentence that
    starts "the chat template …"."""


Writer = Callable[[list[dict[str, Any]], bool], str]
"""(messages, add_generation_prompt) -> the text the chat template makes of them."""


@dataclasses.dataclass(frozen=True, eq=False)
class NativeGrammar(Grammar):
    """A `Grammar` bound to one chat template: its own response parser decodes, the template renders.
    Compared and hashed as a `Grammar` (by its decoder and renderer)."""

    source: str = ""
    """Where the response template comes from: ``trl:<template>``, ``tokenizer`` or ``like:<template>``."""
    format: ResponseFormat | None = None
    reasoning_key: str | None = None
    """The assistant-message key the chat template writes reasoning from (None: it writes none)."""
    writer: Writer | None = dataclasses.field(default=None, repr=False, compare=False)
    generation_prompt: str = dataclasses.field(default="", repr=False)
    trailer: str = ""
    """The end-of-turn text after an assistant message, removed from rendered answers."""
    tools: tuple[str, ...] = ()
    """JSON of the tool schemas that type decoded arguments (`with_tools`); empty: JSON-looking values."""

    def with_tools(self, tools: Sequence[dict[str, Any]] | None) -> NativeGrammar:
        """This grammar with decoded arguments typed by the tools' JSON schemas (transformers' casting:
        ``"7"`` is 7 for an integer parameter and stays ``"7"`` for a string one). Formats that write
        argument values as bare text (Qwen3.5/3.6, GLM-4 MoE, Nemotron 3) need the schemas to tell
        ``"75001"`` from 75001; without them a value that reads as JSON is read as JSON."""
        key = tuple(json.dumps(t, sort_keys=True, ensure_ascii=False) for t in tools or ())
        if key == self.tools:
            return self
        fmt = self.format
        decode = functools.partial(_decode, fmt, tuple(json.loads(k) for k in key) or None)
        return dataclasses.replace(self, decode=decode, tools=key)

    def assistant_message(self, calls: Sequence[ToolCall], reasoning: str | None = None,
                          content: str = "") -> dict[str, Any]:
        """The assistant message the chat template renders for `calls` (OpenAI-style ``tool_calls``,
        the reasoning under `reasoning_key`)."""
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            msg["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in calls]
        if reasoning and self.reasoning_key:
            msg[self.reasoning_key] = reasoning
        return msg


def grammar_with_tools(grammar: Grammar, tools: Sequence[dict[str, Any]] | None) -> Grammar:
    """`grammar` with decoded arguments typed by `tools` (the chat-template tool schemas of the prompt,
    `tooltune.prompts.prompt_tools`) where it is a native grammar (`NativeGrammar.with_tools`); any other
    grammar is returned as it is (its values are typed by their own syntax)."""
    return grammar.with_tools(tools) if isinstance(grammar, NativeGrammar) else grammar


def _decode(fmt: ResponseFormat, tools: Sequence[dict[str, Any]] | None, text: str, mode: str) -> Parsed:
    return fmt.decode(text, mode, tools)


def _clean(g: NativeGrammar, reasoning: str) -> str:
    """`reasoning` without the format's markers (it cannot open or close a region)."""
    fmt = g.format
    marks = (*fmt.call_heads, *fmt.reasoning_heads, *fmt.literals) if fmt else ()
    return strip_tags(reasoning, [m for m in marks if len(m.strip()) > 2])


def _answer(g: NativeGrammar, msg: dict[str, Any]) -> str:
    """What the chat template writes for `msg` after the generation prompt, without the end-of-turn text.

    A template whose generation prompt opens the reasoning (Nemotron 3 writes ``<think>\\n``) writes a
    turn without reasoning differently (``<think></think>``); such a turn is rendered with a marker as
    its reasoning and the marker removed: an empty reasoning, as the model would write it."""
    assert g.writer is not None
    try:
        full = g.writer([*PROBE_USER, msg], False)
        key = g.format.reasoning_field if g.format else None
        if not full.startswith(g.generation_prompt) and key and not msg.get(key):
            marked = g.writer([*PROBE_USER, {**msg, key: _REASONING_MARK}], False)
            if marked.startswith(g.generation_prompt) and _REASONING_MARK in marked:
                full = marked.replace(_REASONING_MARK, "", 1)
    except Exception as e:  # jinja2 raise_exception (one call per turn), TypeError on argument types
        raise ValueError(f"the chat template cannot write this answer ({type(e).__name__}: {e})") from None
    if not full.startswith(g.generation_prompt):
        raise ValueError("the chat template writes this answer differently from how it prompts for it")
    text = full[len(g.generation_prompt) :]
    if g.trailer and text.endswith(g.trailer):
        text = text[: -len(g.trailer)]
    elif g.trailer.strip() and text.rstrip().endswith(g.trailer.strip()):
        text = text.rstrip()[: -len(g.trailer.strip())]
    return text


def _render(g: Grammar, calls: list[ToolCall], reasoning: str | None) -> str:
    """The native renderer: the chat template's answer with `calls` (no calls: the plain reply
    `NO_CALL_REPLY`), with `reasoning` where the template writes reasoning.

    ValueError when the template cannot write the answer, or writes one that its parser does not read
    back to the same calls by name (gpt-oss writes only the first call of a turn, Llama 3.1 refuses a
    second one, Gemma 4 and LFM2.5 cannot name a function with a dot)."""
    assert isinstance(g, NativeGrammar)
    text = _clean(g, reasoning) if reasoning else None
    answer = _answer(g, g.assistant_message(calls, text, "" if calls else NO_CALL_REPLY))
    back = g.decode(answer, "substring")
    if back.calls is None or [c.name for c in back.calls] != [c.name for c in calls]:
        got = back.error if back.calls is None else f"{len(back.calls)} of {len(calls)} calls"
        raise ValueError(f"{g.name}: the chat template's answer does not read back as these calls ({got})")
    return answer


# --- where the response template comes from ---------------------------------------------------------------


def template_source(chat_template: Any) -> str | None:
    """The Jinja source of `chat_template` (a tokenizer, or the source itself) as it renders tools."""
    if isinstance(chat_template, str):
        return chat_template
    if not getattr(chat_template, "chat_template", None):
        return None
    get = getattr(chat_template, "get_chat_template", None)
    if callable(get):
        return get(tools=[{"type": "function", "function": {"name": "f"}}])
    source = chat_template.chat_template
    return source if isinstance(source, str) else None


@dataclasses.dataclass(frozen=True)
class _ChatWriter:
    """A `Writer` through `chat_template` (a tokenizer, rendering `source` with its special tokens, or a
    Jinja source); a class, not a closure, so that a grammar holding it pickles with the reward."""

    chat_template: Any
    source: str

    def __call__(self, messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
        if isinstance(self.chat_template, str):
            return render_chat(self.source, messages, add_generation_prompt=add_generation_prompt)
        return render_chat(self.chat_template, messages, add_generation_prompt, source=self.source)


def _writer(chat_template: Any, source: str) -> Writer:
    return _ChatWriter(chat_template, source)


def _candidates(chat_template: Any, source: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(source label, name, response template) in the order they are tried."""
    own = getattr(chat_template, "response_template", None) if not isinstance(chat_template, str) else None
    digest = hashlib.sha256(source.encode()).hexdigest()[:8]
    found = []
    if isinstance(own, dict):
        found.append(("tokenizer", f"native_{digest}", own))
    known = known_templates()
    if source in known:
        name, spec = known[source]
        found.append((f"trl:{name}", f"native_{name}", spec))
    seen: set[str] = set()
    for name, spec in known.values():
        key = json.dumps(spec, sort_keys=True)
        if key not in seen and not name.endswith("_training"):
            seen.add(key)
            found.append((f"like:{name}", f"native_like_{name}_{digest}", spec))
    return found


def _probe(g: NativeGrammar, reasoning: str | None = None) -> str | None:
    """Why `g` does not read back what its template writes (None: it does): a call (with `reasoning`),
    and a reply without calls."""
    try:
        p = g.decode(_render(g, list(_PROBE_CALLS), reasoning), "strict")
        if not p.format_ok or p.calls != _PROBE_CALLS:
            return f"a call it writes does not parse back ({p.error or p.calls})"
        if reasoning and p.reasoning != reasoning:
            return f"the reasoning it writes does not parse back ({p.reasoning!r})"
        p = g.decode(_render(g, [], reasoning), "strict")
    except ValueError as e:
        return str(e)
    if not p.format_ok or p.calls != []:
        return f"a reply without calls does not parse back as no call ({p.error or p.calls})"
    return None


def _bind(chat_template: Any, source: str, label: str, name: str, spec: dict[str, Any]) -> NativeGrammar:
    """The grammar for one candidate response template, with the probe's findings filled in
    (NativeFormatError when the probe fails)."""
    try:
        fmt = ResponseFormat.build(spec)
    except (ValueError, KeyError, TypeError) as e:
        raise NativeFormatError(f"has a response template that does not load ({e})") from None
    write = _writer(chat_template, source)
    try:
        gen = write(PROBE_USER, True)
        plain = write([*PROBE_USER, {"role": "assistant", "content": _CONTENT_MARK}], False)
    except Exception as e:  # a template error on the probe conversation
        raise NativeFormatError(f"fails on a plain conversation ({type(e).__name__}: {e})") from None
    anchors = list(fmt.anchor_starts(gen))
    prefix = gen[anchors[-1] :] if anchors else ""
    trailer = plain[plain.find(_CONTENT_MARK) + len(_CONTENT_MARK) :] if _CONTENT_MARK in plain else ""
    fmt = dataclasses.replace(fmt, prefix=prefix)
    g = NativeGrammar(name, functools.partial(_decode, fmt, None), _render, source=label, format=fmt,
                      reasoning_key=None, writer=write, generation_prompt=gen, trailer=trailer)
    problem = _probe(g)
    if problem is not None and trailer.strip():  # the format may need its end-of-turn token back
        fmt2 = dataclasses.replace(fmt, terminator=trailer.strip())
        g2 = dataclasses.replace(g, decode=functools.partial(_decode, fmt2, None), format=fmt2)
        if _probe(g2) is None:
            g, problem = g2, None
    if problem is not None:
        raise NativeFormatError(problem)
    with_reasoning = dataclasses.replace(g, reasoning_key=fmt.reasoning_field)
    if fmt.reasoning_field and _probe(with_reasoning, _REASONING_MARK) is None:
        return with_reasoning
    return g  # the template's answers carry no reasoning


def native_grammar(chat_template: Any) -> NativeGrammar:
    """The native grammar of `chat_template` (a tokenizer, or a chat template's Jinja source): the first
    candidate response template (the tokenizer's own, TRL's for this template, then any of TRL's that
    reads this template's answers) that passes the probe. NativeFormatError says why none does."""
    source = template_source(chat_template)
    if source is None:
        raise NativeFormatError("is missing (the tokenizer has no chat template)")
    return _native_grammar(chat_template, source)


def _native_grammar(chat_template: Any, source: str) -> NativeGrammar:
    problems = []
    for label, name, spec in _candidates(chat_template, source):
        try:
            return _bind(chat_template, source, label, name, spec)
        except NativeFormatError as e:
            if not label.startswith("like:"):
                problems.append(f"{label}: {e}")
    detail = f" ({'; '.join(problems)})" if problems else ""
    raise NativeFormatError(
        "writes tool calls in a format that no known response parser reads back: neither the tokenizer "
        f"(response_template) nor TRL's response templates fit{detail}"
    )


__all__ = ["NativeFormatError", "NativeGrammar", "grammar_with_tools", "native_grammar", "template_source"]
