"""Chat token ids in which text from outside the model is plain text, never a control token.

A tool result, a simulated user's reply or a user request can hold the strings of the tokenizer's
added tokens: ``<|im_end|>``, ``<|im_start|>assistant``, ``</tool_call>``. Rendering the chat template to
one string and tokenizing it (``apply_chat_template(..., tokenize=True)``, or ``tokenizer(text)`` of the
rendered text) turns them into the real tokens, so a tool could end its own turn and write an assistant
or system turn the model then reads, or is trained on, as its own.

`encode_chat` is the one way tooltune turns chat messages into token ids. Each occurrence of a marker
(the string of an added token) in a message is replaced by a placeholder unique to the call, the chat
template is rendered once, the render is split at the placeholders, the template's pieces are tokenized
as the tokenizer always does, and each placeholder becomes its marker's text encoded without any added
token (`encode_plain`). Which markers are replaced depends on where the text comes from:

- the messages of `OUTSIDE_ROLES` (tool results, users) and the tool schemas: every added token, special
  or not (``</tool_call>`` is an ordinary added token in Qwen's vocabulary);
- the other messages (system, assistant): special tokens only, since their text legitimately carries the
  non-special tags tooltune writes itself (``<tool_call>`` in an earlier call, ``<tools>`` in a system
  prompt that lists the tools).

Whitespace-only added tokens are not markers (some vocabularies add runs of spaces or newlines, which
ordinary text holds). A conversation without any marker is rendered and tokenized in one piece, so its
ids are exactly those of ``apply_chat_template(..., tokenize=True)``. A user message is outside text as a
whole: under ``context`` history (`tooltune.prompts.render_prompt`), which writes earlier calls and tool
results into one user turn, the call tags of earlier turns are plain text too.
"""

from __future__ import annotations

import re
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OUTSIDE_ROLES = ("user", "tool", "ipython", "function", "observation")
"""Roles whose message text comes from outside the model (users, tools, environments): every added token
in it is encoded as plain text."""


@dataclass(frozen=True)
class Markers:
    """The marker strings of one tokenizer, as patterns: `special` (special added tokens and the named
    special tokens), `added` (every added token), and the ids of all of them."""

    special: re.Pattern[str] | None
    added: re.Pattern[str] | None
    ids: frozenset[int]


_CACHE: weakref.WeakKeyDictionary[Any, tuple[int, Markers]] = weakref.WeakKeyDictionary()


def _pattern(strings: set[str]) -> re.Pattern[str] | None:
    # Longest first: where two markers start at one place the longer one is the token the tokenizer reads.
    return re.compile("|".join(map(re.escape, sorted(strings, key=len, reverse=True)))) if strings else None


def markers(tokenizer: Any) -> Markers:
    """The marker strings of `tokenizer` (cached while its added vocabulary keeps its size)."""
    decoder: Mapping[int, Any] = getattr(tokenizer, "added_tokens_decoder", None) or {}
    try:
        cached = _CACHE.get(tokenizer)
    except TypeError:  # an object that cannot be weakly referenced is measured every time
        cached = None
    if cached is not None and cached[0] == len(decoder):
        return cached[1]
    special = {t for t in getattr(tokenizer, "all_special_tokens", ()) if isinstance(t, str)}
    added: set[str] = set()
    for token in decoder.values():
        text = getattr(token, "content", token)
        if not isinstance(text, str):
            continue
        added.add(text)
        if getattr(token, "special", False):
            special.add(text)
    special = {t for t in special if t and not t.isspace()}
    added = {t for t in added if t and not t.isspace()} | special
    ids = frozenset(i for i, t in decoder.items() if getattr(t, "content", t) in added) | frozenset(
        i for i in getattr(tokenizer, "all_special_ids", ()) if isinstance(i, int))
    found = Markers(_pattern(special), _pattern(added), ids)
    try:
        _CACHE[tokenizer] = (len(decoder), found)
    except TypeError:
        pass
    return found


def _ids(encoded: Any) -> list[int]:
    return list(encoded["input_ids"] if isinstance(encoded, Mapping) or hasattr(encoded, "keys") else encoded)


def _without_added_tokens(tokenizer: Any, text: str) -> list[int]:
    """`text` through the tokenizer's own pipeline with no added token matched."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # a Python tokenizer: split_special_tokens skips every added token there
        return _ids(tokenizer(text, add_special_tokens=False, split_special_tokens=True))
    # A `tokenizers` backend matches added tokens before its pipeline whatever split_special_tokens says
    # about the special ones, so run normalizer, pre-tokenizer and model directly.
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    pieces = [text] if backend.pre_tokenizer is None else [
        piece for piece, _ in backend.pre_tokenizer.pre_tokenize_str(text)]
    return [token.id for piece in pieces for token in backend.model.tokenize(piece)]


def encode_plain(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` as plain text: no added token (special or not) among them, however the text
    spells one; exactly ``tokenizer(text, add_special_tokens=False)`` for text that spells none."""
    if not text:
        return []
    found = markers(tokenizer)
    if found.added is None or found.added.search(text) is None:
        return _ids(tokenizer(text, add_special_tokens=False))
    ids = _without_added_tokens(tokenizer, text)
    if found.ids.isdisjoint(ids):
        return ids
    # A vocabulary whose ordinary entries spell a marker: one character at a time cannot rebuild it.
    return [i for ch in text for i in _without_added_tokens(tokenizer, ch)]


class _Placeholders:
    """Replaces marker occurrences by placeholders that no text of this call contains."""

    def __init__(self, texts: Sequence[str]) -> None:
        nonce = uuid.uuid4().hex
        while any(nonce in t for t in texts):  # pragma: no cover - a 128-bit collision
            nonce = uuid.uuid4().hex
        # Private-use characters: no template escapes, trims or JSON-encodes them away.
        self.open, self.close = f"\ue000{nonce}:", "\ue001"
        self.split = re.compile(re.escape(self.open) + r"(\d+)" + re.escape(self.close))
        self.strings: list[str] = []

    def _one(self, match: re.Match[str]) -> str:
        self.strings.append(match.group(0))
        return f"{self.open}{len(self.strings) - 1}{self.close}"

    def replace(self, value: Any, pattern: re.Pattern[str] | None, skip: frozenset[str] = frozenset()) -> Any:
        """`value` (a string, or lists and dicts of them) with every match of `pattern` in its strings
        replaced; dict keys and the entries named in `skip` are kept."""
        if pattern is None:
            return value
        if isinstance(value, str):
            return pattern.sub(self._one, value)
        if isinstance(value, Mapping):
            return {k: v if k in skip else self.replace(v, pattern) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.replace(v, pattern) for v in value]
        return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _has(value: Any, pattern: re.Pattern[str] | None) -> bool:
    return pattern is not None and any(pattern.search(s) for s in _strings(value))


def encode_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool = True,
    tools: list[dict[str, Any]] | None = None,
    continuation: str = "",
    **template_kwargs: Any,
) -> list[int]:
    """Token ids of `messages` through `tokenizer`'s chat template (`tools` to its ``tools`` variable,
    `template_kwargs` such as ``chat_template`` or ``enable_thinking`` passed on), followed by
    `continuation` (template-side text such as the start of the answer), with text from outside the
    model encoded as plain text (see the module docstring). Equal to
    ``apply_chat_template(..., tokenize=True)`` of the same arguments when no text spells a marker."""
    found = markers(tokenizer)
    role = frozenset({"role"})
    outside = [m.get("role") in OUTSIDE_ROLES for m in messages]
    hostile = _has(tools, found.added) or any(
        _has({k: v for k, v in m.items() if k != "role"}, found.added if out else found.special)
        for m, out in zip(messages, outside, strict=True)
    )
    extra = {"tools": tools} if tools else {}
    if not hostile:
        text = tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=add_generation_prompt, **extra,
            **template_kwargs)
        return _ids(tokenizer(text + continuation, add_special_tokens=False))
    marks = _Placeholders(_strings(list(messages)) + _strings(tools) + [continuation])
    marked = [marks.replace(m, found.added if out else found.special, role)
              for m, out in zip(messages, outside, strict=True)]
    if tools:
        extra["tools"] = marks.replace(tools, found.added)
    text = tokenizer.apply_chat_template(
        marked, tokenize=False, add_generation_prompt=add_generation_prompt, **extra, **template_kwargs)
    text += continuation
    pieces: list[str] = []  # the template's text between placeholders, tokenized in one batch
    plain: list[int] = []  # the marker after each piece (-1: none)
    start = 0
    for match in marks.split.finditer(text):
        pieces.append(text[start : match.start()])
        plain.append(int(match.group(1)))
        start = match.end()
    pieces.append(text[start:])
    plain.append(-1)
    encoded = _ids(tokenizer(pieces, add_special_tokens=False))
    spelled: dict[str, list[int]] = {}  # each distinct marker string is encoded once
    ids: list[int] = []
    for piece_ids, k in zip(encoded, plain, strict=True):
        ids += piece_ids
        if k >= 0:
            marker = marks.strings[k]
            if marker not in spelled:
                spelled[marker] = encode_plain(tokenizer, marker)
            ids += spelled[marker]
    return ids


def count_marker_tokens(tokenizer: Any, ids: Sequence[int]) -> int:
    """How many of `ids` are added tokens that are markers (a measure of forged turn boundaries)."""
    found = markers(tokenizer)
    return sum(i in found.ids for i in ids)
