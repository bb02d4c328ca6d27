"""Tool-N1 fine-grained reward ablation (arXiv 2505.00024, Table 3).

The paper gives partial credit for a correct reasoning format and for correct function names, and
full credit (1) only when everything is right; it leaves open how the terms combine when the calls are
right but the reasoning format is not, and what "format" covers. Those cases follow the authors'
released scorer (Tool-N1's `compute_score_v4`, the "partial reasoning + function name" variant):

    r = w_f · 1[reasoning half ok]
      + (1 − w_f) · 1[call half ok and calls == a*]
      + w_n · 1[names(calls) == names(a*) and not (calls == a*)]

with w_f = w_n = 0.2 as in the paper, so that
- right calls after a right reasoning block: 0.2 + 0.8 = 1;
- right calls with no reasoning block, or an unclosed one: 0.8 (the authors' code; the paper is silent);
- right names, wrong arguments: 0.2 (+ 0.2 with the reasoning block);
- a call block that does not decode after a right reasoning block: 0.2 (the reasoning term stands on
  its own, as in the authors' code).

The halves come from the parser (`tooltune.parsing.parse_parts`) under the reward's format mode, and
the mode's format holds exactly when both halves do:
- `strict`: the reasoning half is one non-empty reasoning block with only whitespace before the call
  block; the call half is exactly one call block with nothing after it, decoded strictly. Text after
  the block, two call blocks or a repeated `<think>` therefore never earn the full score.
- `substring` (the authors' scorer): the reasoning half is `<think>` and `</think>` present (each once,
  `</think>` before the first `<tool_call>`, as for the binary reward in this mode); the call half is
  the last call block, read as the original scorer reads it.
The name term reads the same last block (`tooltune.parsing.parse_call_names`) in both modes, and counts
the names of calls whose arguments cannot be compared (a JSON-string "arguments"), as the authors'
code does. `names ==` is a multiset comparison. Range [0, 1] (as long as w_f + w_n <= 1).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tooltune.matching import calls_match
from tooltune.rewards.base import ParseCache, Reward
from tooltune.schema import ToolCall


class FineGrainedReward(Reward):
    name = "fine_grained"

    def __init__(
        self,
        template: str = "tool_n1",
        format_mode: str = "strict",
        format_weight: float = 0.2,
        name_weight: float = 0.2,
    ) -> None:
        super().__init__(template, format_mode)
        if format_weight < 0 or name_weight < 0 or format_weight + name_weight > 1:
            raise ValueError(
                "FineGrainedReward: partial weights must be >= 0 and sum to at most 1, "
                f"got format_weight={format_weight}, name_weight={name_weight}"
            )
        self.format_weight = float(format_weight)
        self.name_weight = float(name_weight)

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        parts = ctx.parts(self.grammar, self.format_mode)
        r = self.format_weight if parts.reasoning_ok else 0.0
        if parts.calls is not None and calls_match(parts.calls, gold):
            return r + (1.0 - self.format_weight)
        names = ctx.names(self.grammar)
        if names is not None and Counter(names) == Counter(g.name for g in gold):
            r += self.name_weight
        return r
