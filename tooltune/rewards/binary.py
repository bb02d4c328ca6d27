"""Tool-N1 binary reward (Nemotron-Research-Tool-N1, arXiv 2505.00024, Eq. 4).

    r(c, a*) = 1   if format_ok(c) and calls(c) == a*
               0   otherwise

`format_ok` is the parser's verdict (`tooltune.parsing.parse_completion`, under the template's grammar):
under `strict` for `tool_n1`, exactly one `<think>…</think>` with non-empty reasoning followed by
exactly one `<tool_call>…</tool_call>` holding a JSON list of {"name", "arguments"} objects (or one
such object), nothing but whitespace around; `[]` is an explicit "no call". `substring` follows the
authors' scorer (the last call block counts, read with `json.loads`; `<think>` and `</think>` once each,
before the first `<tool_call>`; any text around), except where that scorer raises (a bare scalar in the
block scores 0) or accepts what the paper's format is not (a call list encoded as a JSON string scores
0); docs/rewards.md lists every difference. For `r2if` the format is one `<reason>` block then one
`<tool>` block, and the fixed rejection text inside `<tool>` is an explicit "no call" (correct exactly
when the answer is empty).

`calls(c) == a*` is `tooltune.matching.calls_match`: a multiset comparison, order-free over calls and
argument keys, values compared as typed JSON values ("5" != 5, 5 != 5.0, true != 1). The whole verdict
is `tooltune.matching`'s (`exact_match` on text, `parsed_match` on a parse shared with the other
components of a composite), the one evaluation and data selection use.

`require_format=False` drops the format term: the Tool-N1 ablation "binary without reasoning format"
and the multi-turn recipe of the efficiency paper (tool-call correctness only). The calls are then
read as `substring` reads them (the last call block, whatever surrounds it; the authors' scorer for this
ablation does the same) so that only correctness counts.
"""

from __future__ import annotations

import logging
from typing import Any

from tooltune.matching import exact_match, parsed_match
from tooltune.prompts import grammar_for
from tooltune.rewards.base import LENIENT, ParseCache, Reward, completion_text, gold_calls
from tooltune.schema import Parsed, ToolCall

logger = logging.getLogger(__name__)


def calls_correct(parsed: Parsed, gold: list[ToolCall]) -> bool:
    """Whether the decoded calls equal the ground truth, whatever the format (no call block decoded ->
    False): `tooltune.matching.parsed_match` without the format term."""
    return parsed_match(parsed, gold, require_format=False) == 1.0


def binary_from_parses(
    ctx: ParseCache, gold: list[ToolCall], grammar: str, format_mode: str, require_format: bool
) -> float:
    """`tooltune.matching.exact_match`'s verdict on the completion held by `ctx`, parsed as it parses
    (under `format_mode` when the format is required, the calls alone otherwise) and shared with the
    other components."""
    parsed = ctx.get(grammar, format_mode if require_format else LENIENT)
    return parsed_match(parsed, gold, require_format)


def binary_reward(
    completion: Any,
    answer: Any,
    template: str = "tool_n1",
    format_mode: str = "strict",
    require_format: bool = True,
) -> float:
    """Tool-N1 binary reward: 1.0 when the format is right and the calls equal `answer`, else 0.0.

    `completion` is the assistant text (or TRL conversational messages); `answer` is a list of
    ToolCall, a list of {"name", "arguments"} dicts, or that list as a JSON string. Never raises.
    """
    try:
        text = completion if type(completion) is str else completion_text(completion)
        gold = lambda: gold_calls(answer)  # noqa: E731  (decoded only when the format passes)
        return exact_match(text, gold, grammar_for(template), format_mode, require_format)
    except Exception as e:  # pragma: no cover - the parser and matcher are designed not to raise
        logger.warning("binary_reward failed (%s: %.200s); scoring 0", type(e).__name__, e)
        return 0.0


class BinaryReward(Reward):
    """Registry form of `binary_reward` (range {0, 1})."""

    name = "binary"

    def __init__(
        self, template: str = "tool_n1", format_mode: str = "strict", require_format: bool = True
    ) -> None:
        super().__init__(template, format_mode)
        self.require_format = bool(require_format)

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        return binary_from_parses(ctx, gold, self.grammar, self.format_mode, self.require_format)


class CorrectnessReward(BinaryReward):
    """Tool-call correctness only (no format term): `binary` with require_format=False."""

    name = "correctness"

    def __init__(
        self, template: str = "tool_n1", format_mode: str = "strict", require_format: bool = False
    ) -> None:
        super().__init__(template, format_mode, require_format)


class FormatReward(Reward):
    """The format verdict alone, 1.0 or 0.0: logged next to the others to watch format drift."""

    name = "format"

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        return 1.0 if self.parsed(ctx).format_ok else 0.0
