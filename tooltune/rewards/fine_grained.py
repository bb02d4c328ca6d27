"""Tool-N1 fine-grained reward ablation (arXiv 2505.00024, Table 3).

    r = 1                                                  if format_ok and calls == a*
    r = w_f * 1[format_ok] + w_n * 1[names(calls) == names(a*)]   otherwise

with w_f = w_n = 0.2 in the paper. `names(...) ==` is a multiset comparison of function names
(`tooltune.matching.names_match`); a completion whose call block cannot be decoded gets no name
credit. Range [0, 1] (as long as w_f + w_n <= 1).
"""

from __future__ import annotations

from typing import Any

from tooltune.matching import names_match
from tooltune.rewards.base import LENIENT, ParseCache, Reward
from tooltune.rewards.binary import calls_correct
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
        parsed = self.parsed(ctx)
        if parsed.format_ok and calls_correct(parsed, gold):
            return 1.0
        calls = parsed.calls
        if calls is None and not parsed.format_ok:
            # Strict parsing may refuse to decode a malformed completion; names can still be read leniently.
            calls = ctx.get(self.grammar, LENIENT).calls
        names_ok = calls is not None and bool(names_match(calls, gold))
        return self.format_weight * parsed.format_ok + self.name_weight * names_ok
