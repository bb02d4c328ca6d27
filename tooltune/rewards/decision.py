"""Call decision: whether the completion calls a tool exactly when the ground truth does.

    r(c, a*) = 1   if names(c) is not None and (names(c) != []) == (a* != [])
               0   otherwise

`names(c)` is the list of function names in the call block the calls-only read takes
(`tooltune.parsing.parse_call_names`: the last block, whatever surrounds it; None when no block decodes
to a list of call objects). An undecodable completion never earns the term: a model must still write a
call block (`[]` being the explicit "no call") to be paid for abstaining or for calling.

This is tooltune's own term, not one of the papers'. It exists for training on a mix of prompts that
expect a call and prompts that expect none (irrelevance: tools offered, none fits). Tool-N1's
fine-grained reward pays `[]` on a call prompt what it pays a call of the wrong function (the
reasoning term, 0.2), while `[]` on a no-call prompt earns the full 1; with half the prompts expecting
no call, GRPO then pushes every answer towards `[]` (docs/BENCHMARKS.md measures the collapse). Added
with a small weight, e.g. `{fine_grained: 1.0, decision: 0.2}`, the term ranks any call attempt above
`[]` on a call prompt and `[]` above any call on a no-call prompt, and leaves the order among calls
to the other components. Range {0, 1}.
"""

from __future__ import annotations

from typing import Any

from tooltune.rewards.base import ParseCache, Reward
from tooltune.schema import ToolCall


class DecisionReward(Reward):
    name = "decision"

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        names = ctx.names(self.grammar)
        if names is None:
            return 0.0
        return 1.0 if bool(names) == bool(gold) else 0.0
