"""ToolRL-style reward (Qian et al. 2025, "ToolRL: Reward is All Tool Learning Needs", Sec. 3.3).

    R_final = R_format + R_correct,     R_format in {0, 1},   R_correct in [-3, 3]

Correctness compares the predicted calls P with the ground-truth calls G at three levels:

    r_name  = |N_G ∩ N_P| / |N_G ∪ N_P|            multiset Jaccard of function names (1 if both empty)
    for a ground-truth call g matched to a predicted call p of the same name:
    r_param(g, p) = |keys(g) ∩ keys(p)| / |keys(g) ∪ keys(p)|   (1 if both have no arguments)
    r_value(g, p) = Σ_{k in keys(g)} 1[g[k] == p[k]]             exact, typed value matches
    R_max   = r_name + max over one-to-one matchings M of Σ_{(g,p) in M} (r_param + r_value)
    S_max   = 1 + |G| + Σ_{g in G} |keys(g)|
    R_correct = 6 · R_max / S_max − 3

The matching is optimal (Hungarian assignment over same-name pairs), as the paper states; the
released code matches greedily, which can only score lower. R_correct = −3 when the call block is
missing or cannot be decoded. Differences from the paper's code, all deliberate: values compare as
typed JSON values (`tooltune.matching.values_equal`: "5" != 5, 5 != 5.0), not Python `==`; an
exact match of all calls scores 3 by the same typed multiset test the binary reward uses; an empty
ground truth (no call expected) is scored like any other (3 for `[]` / rejection, −3 for any call)
instead of being skipped with 0. Range of the sum: [−3, 4].
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tooltune.matching import calls_match, values_equal
from tooltune.rewards.base import LENIENT, ParseCache, Reward
from tooltune.schema import ToolCall

# An adversarial completion may hold thousands of calls: the assignment matrix is |G| x |P| with G small,
# but cap P so the scorer stays cheap (extra calls already lower r_name).
MAX_PRED_CALLS = 512


def multiset_jaccard(a: list[str], b: list[str]) -> float:
    if not a and not b:
        return 1.0
    ca, cb = Counter(a), Counter(b)
    inter = sum((ca & cb).values())
    return inter / (len(a) + len(b) - inter)


def _pair_score(g: ToolCall, p: ToolCall) -> float:
    gk, pk = set(g.arguments), set(p.arguments)
    union = gk | pk
    r_param = len(gk & pk) / len(union) if union else 1.0
    r_value = sum(1 for k in gk & pk if values_equal(g.arguments[k], p.arguments[k]))
    return r_param + r_value


def _best_matching(gold: list[ToolCall], pred: list[ToolCall]) -> float:
    """Maximum total pair score over one-to-one matchings of same-name calls."""
    if not gold or not pred:
        return 0.0
    import numpy as np  # deferred: only optimal matching needs numpy
    from scipy.optimize import linear_sum_assignment  # deferred: only optimal matching needs scipy

    m = np.zeros((len(gold), len(pred)))
    for i, g in enumerate(gold):
        for j, p in enumerate(pred):
            if g.name == p.name:
                m[i, j] = _pair_score(g, p)
    rows, cols = linear_sum_assignment(m, maximize=True)
    return float(m[rows, cols].sum())


def toolrl_correctness(pred: list[ToolCall] | None, gold: list[ToolCall]) -> float:
    """R_correct in [-3, 3] (see module docstring); `pred=None` means no decodable call block."""
    if pred is None:
        return -3.0
    if calls_match(pred, gold):
        return 3.0
    pred = pred[:MAX_PRED_CALLS]
    r_name = multiset_jaccard([g.name for g in gold], [p.name for p in pred])
    s_max = 1 + len(gold) + sum(len(g.arguments) for g in gold)
    r_max = r_name + _best_matching(gold, pred)
    return 6.0 * r_max / s_max - 3.0


class ToolRLFormatReward(Reward):
    """R_format in {0, 1}: the parser's format verdict for the template."""

    name = "toolrl_format"

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        return 1.0 if self.parsed(ctx).format_ok else 0.0


class ToolRLCorrectnessReward(Reward):
    """R_correct in [-3, 3]; calls are read leniently so a format slip is punished by R_format only."""

    name = "toolrl_correctness"
    lo, hi = -3.0, 3.0

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        parsed = self.parsed(ctx)
        calls = parsed.calls if parsed.calls is not None else ctx.get(self.grammar, LENIENT).calls
        return toolrl_correctness(calls, gold)


class ToolRLReward(Reward):
    """R_format + R_correct in [-3, 4]."""

    name = "toolrl"
    lo, hi = -3.0, 4.0

    def __init__(self, template: str = "tool_n1", format_mode: str = "strict") -> None:
        super().__init__(template, format_mode)
        self._terms = (
            ToolRLFormatReward(self.grammar, format_mode),
            ToolRLCorrectnessReward(self.grammar, format_mode),
        )

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        return sum(term.score(ctx, gold) for term in self._terms)
