"""What every reward shares: input coercion, one parse per completion, and the never-raise contract.

A reward is a small picklable object (configuration only, no closures) with
- `score(text, gold, ctx, **columns) -> float`: the equation; may assume clean inputs;
- `__call__(completion, answer, **columns) -> float`: the safe entry point: it coerces the completion
  (a string or TRL's conversational `[{"role": "assistant", "content": ...}]`) and the ground truth
  (ToolCalls, dicts, or a JSON string), and turns any exception into the reward's floor value
  (`lo`), logging it, because a crashed reward would stop a training run on one hostile string;
- `batch(completions, answers, **columns) -> list[float]`: many at once (CER and SMV override it to
  make one batched student / embedding call per training batch).

`ParseCache` lets a composite parse each completion once per (grammar, mode) for all components.
"""

from __future__ import annotations

import abc
import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from tooltune.parsing import (
    GRAMMARS,
    MODES,
    Grammar,
    Parts,
    get_grammar,
    parse_call_names,
    parse_calls,
    parse_completion,
    parse_parts,
)
from tooltune.prompts import PromptTemplate, grammar_for, grammar_with_tools
from tooltune.schema import Parsed, ToolCall, calls_from_any
from tooltune.schema.rows import CHAT_TOOLS, row_tools

logger = logging.getLogger(__name__)

LENIENT = "lenient"
"""ParseCache mode reading only the calls (`tooltune.parsing.parse_calls`): no format term."""


def completion_text(completion: Any) -> str:
    """The assistant text of a completion given as a string or as TRL conversational messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        content = completion.get("content", "")
        return content if isinstance(content, str) else ""
    if isinstance(completion, Sequence):
        # Conversational completions: concatenate assistant contents (normally exactly one message).
        parts = [m.get("content") for m in completion if isinstance(m, Mapping)]
        return "".join(p for p in parts if isinstance(p, str))
    return "" if completion is None else str(completion)


def gold_calls(answer: Any) -> list[ToolCall]:
    """Ground truth as ToolCalls; raises SchemaError on a malformed answer (a data error, not model output).

    A JSON-string answer (TRL rows, verl) is decoded once and shared by the n rollouts of its prompt;
    the returned list is shared too, so callers must not mutate it.
    """
    if type(answer) is str:
        return _gold_from_json(answer)
    if isinstance(answer, list) and all(isinstance(c, ToolCall) for c in answer):
        return answer
    return calls_from_any(answer)


@functools.lru_cache(maxsize=8192)
def _gold_from_json(answer: str) -> list[ToolCall]:
    return calls_from_any(answer)


class ParseCache:
    """Parses a completion once per (grammar, mode) for every component of a composite.

    `tools`: the chat-template tools of the completion's prompt (``native`` rows); a native grammar whose
    format writes argument values as bare text types them by these schemas (`grammar_with_tools`)."""

    __slots__ = ("text", "tools", "_parsed")

    def __init__(self, text: str, tools: Sequence[dict[str, Any]] | None = None) -> None:
        self.text = text
        self.tools = tools
        self._parsed: dict[tuple[str, str], Any] = {}

    def get(self, grammar: str | Grammar, mode: str = "strict") -> Parsed:
        """The parse of the text under grammar `grammar` (a name or a value) and `mode` (or `LENIENT`)."""
        key = (grammar, mode)
        parsed = self._parsed.get(key)
        if parsed is None:
            typed = grammar_with_tools(get_grammar(grammar), self.tools) if self.tools else grammar
            if mode == LENIENT:
                parsed = parse_calls(self.text, typed)
            else:
                parsed = parse_completion(self.text, typed, mode)
            self._parsed[key] = parsed
        return parsed

    def parts(self, grammar: str | Grammar, mode: str = "strict") -> Parts:
        """The format's two halves under `mode` (`tooltune.parsing.parse_parts`)."""
        key = (grammar, "parts:" + mode)
        if key not in self._parsed:
            self._parsed[key] = parse_parts(self.text, grammar, mode)
        return self._parsed[key]

    def names(self, grammar: str | Grammar) -> list[str] | None:
        """The function names of the calls-only read (`tooltune.parsing.parse_call_names`)."""
        key = (grammar, "names")
        if key not in self._parsed:
            self._parsed[key] = parse_call_names(self.text, grammar)
        return self._parsed[key]


def check_template(template: str | PromptTemplate | Grammar, format_mode: str, where: str) -> None:
    """Configuration errors surface at construction, not as silent zeros during training."""
    try:
        grammar_for(template)
    except ValueError as e:
        raise ValueError(f"{where}.template: {e}") from None
    if format_mode not in MODES:
        raise ValueError(f"{where}.format_mode: expected one of {MODES}, got {format_mode!r}")


def grammar_key(grammar: Grammar) -> str | Grammar:
    """How a reward holds `grammar`: a registered grammar by its name (a reward unpickled in another
    process finds it there, whatever templates that process registered), any other (a model's own
    format) as the value itself, which pickles with the reward."""
    return grammar.name if grammar.name in GRAMMARS and GRAMMARS[grammar.name] is grammar else grammar


class Reward(abc.ABC):
    """Base class: subclasses set `name`, `lo`, `hi` and implement `score`."""

    name = "reward"
    lo = 0.0
    hi = 1.0
    needs: tuple[str, ...] = ()
    """Reward-input columns (`tooltune.schema.rows`) besides the completion and the answer without which
    the reward cannot score: a trainer checks them before training instead of scoring `lo` per rollout."""

    def __init__(
        self, template: str | PromptTemplate | Grammar = "tool_n1", format_mode: str = "strict"
    ) -> None:
        """`template`: a template name, a template value (one resolved for a model's own format,
        `tooltune.prompts.resolve_native`) or a grammar."""
        check_template(template, format_mode, type(self).__name__)
        self.template = template if isinstance(template, str) else template.name
        self.grammar = grammar_key(grammar_for(template))
        self.format_mode = format_mode

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"

    @abc.abstractmethod
    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        """The reward of the completion held by `ctx` against `gold`, within [lo, hi]."""

    def parsed(self, ctx: ParseCache) -> Parsed:
        return ctx.get(self.grammar, self.format_mode)

    def safe_score(self, ctx: ParseCache, answer: Any, **columns: Any) -> float:
        try:
            value = float(self.score(ctx, gold_calls(answer), **columns))
        except Exception as e:  # the contract: a reward never stops training
            logger.warning(
                "reward %s failed (%s: %.200s); scoring %s", self.name, type(e).__name__, e, self.lo
            )
            return self.lo
        if not (self.lo <= value <= self.hi):  # NaN also lands here
            logger.warning("reward %s out of range (%r); clamped", self.name, value)
            value = self.lo if value != value else min(max(value, self.lo), self.hi)
        return value

    def __call__(self, completion: Any, answer: Any, **columns: Any) -> float:
        return self.safe_score(parse_contexts([completion], {k: [v] for k, v in columns.items()})[0], answer,
                               **columns)

    def batch(
        self, completions: Sequence[Any], answers: Sequence[Any], **columns: Sequence[Any]
    ) -> list[float]:
        """Score many completions; `columns` hold one value per completion (TRL's batched layout)."""
        return self.batch_ctx(parse_contexts(completions, columns), answers, **columns)

    def batch_ctx(
        self, ctxs: Sequence[ParseCache], answers: Sequence[Any], **columns: Sequence[Any]
    ) -> list[float]:
        return [
            self.safe_score(ctx, a, **row_columns(columns, i))
            for i, (ctx, a) in enumerate(zip(ctxs, answers))
        ]


def parse_contexts(completions: Sequence[Any], columns: Mapping[str, Any]) -> list[ParseCache]:
    """One `ParseCache` per completion, holding its row's chat-template tools (the `chat_tools` column
    of ``native`` rows; a value that does not read as a tool list counts as none)."""
    tools = columns.get(CHAT_TOOLS)
    out = []
    for i, c in enumerate(completions):
        value = tools[i] if isinstance(tools, (list, tuple)) and i < len(tools) else None
        try:
            row = row_tools({CHAT_TOOLS: value}) if value else None
        except (ValueError, TypeError):
            row = None
        out.append(ParseCache(completion_text(c), row if isinstance(row, list) else None))
    return out


def row_columns(columns: Mapping[str, Any], i: int) -> dict[str, Any]:
    """The i-th row of batched columns; scalars (e.g. `trainer_state`) pass through unchanged."""
    out = {}
    for k, v in columns.items():
        if isinstance(v, (list, tuple)):
            out[k] = v[i] if i < len(v) else None
        else:
            out[k] = v
    return out
