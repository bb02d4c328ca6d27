"""ToolRL-style reward (Qian et al. 2025, "ToolRL: Reward is All Tool Learning Needs", Sec. 3.3).

    R_final = R_format + R_correct,     R_format in {0, 1},   R_correct in [-3, 3]

R_format is the parser's format verdict under the template's grammar. Under the `toolrl` grammar (the
`toolrl` preset) that is ToolRL's own rule: ``<think>…</think>\n<tool_call>\n…\n</tool_call>``
(optionally ``\n<response>…</response>`` after it) or ``<think>…</think>\n<response>…</response>``,
whitespace as ToolRL's patterns fix it; it is about the tags, not about decodable JSON; and, as in
ToolRL, a call block must be there exactly when the ground truth has calls.

Correctness compares the predicted calls P with the ground-truth calls G at three levels:

    r_name  = |N_G ∩ N_P| / |N_G ∪ N_P|            multiset Jaccard of function names (1 if both empty)
    for a ground-truth call g matched to a predicted call p of the same name:
    r_param(g, p) = |keys(g) ∩ keys(p)| / |keys(g) ∪ keys(p)|   (1 if both have no arguments)
    r_value(g, p) = Σ_{k in keys(g)} 1[g[k] == p[k]]             exact, typed value matches
    R_max   = r_name + max over one-to-one matchings M of Σ_{(g,p) in M} (r_param + r_value)
    S_max   = 1 + |G| + Σ_{g in G} |keys(g)|
    R_correct = 6 · R_max / S_max − 3

The calls are those of the block ToolRL reads (under `toolrl`: from the first ``<tool_call>`` to the
next ``</tool_call>``, one JSON object per line with "name" and "parameters"); R_correct = −3 when it is
missing or cannot be decoded. Differences from ToolRL's code, all deliberate: the matching is optimal
(Hungarian assignment over same-name pairs, as the paper states; the released code matches greedily,
which can only score lower); values compare as typed JSON values (`tooltune.matching.values_equal`:
"5" != 5, 5 != 5.0), not Python `==`; an exact match of all calls scores 3 by the same typed multiset
test the binary reward uses; an empty ground truth (no call expected) is scored like any other (3 for
no call, −3 for any call) instead of being skipped with 0. Range of the sum: [−3, 4].
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tooltune.matching import calls_match, values_equal
from tooltune.parsing import get_grammar
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
    """Maximum total pair score over one-to-one matchings of same-name calls. Names match apart, so the
    matching splits by name; a name with one call on either side needs no assignment solver."""
    groups: dict[str, tuple[list[ToolCall], list[ToolCall]]] = {}
    for g in gold:
        groups.setdefault(g.name, ([], []))[0].append(g)
    for p in pred:
        if p.name in groups:
            groups[p.name][1].append(p)
    total = 0.0
    for gs, ps in groups.values():
        if not ps:
            continue
        if len(gs) == 1 or len(ps) == 1:
            total += max(_pair_score(g, p) for g in gs for p in ps)
        else:
            total += _assignment(gs, ps)
    return total


def _assignment(gold: list[ToolCall], pred: list[ToolCall]) -> float:
    """Hungarian assignment of same-name calls (several on both sides)."""
    import numpy as np  # deferred: only several same-name calls on both sides need numpy
    from scipy.optimize import linear_sum_assignment  # deferred: only that case needs scipy

    m = np.array([[_pair_score(g, p) for p in pred] for g in gold])
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
    """R_format in {0, 1}: the parser's format verdict for the template; under a grammar with a
    free-text answer block (`toolrl`), a call block is also required exactly when calls are expected."""

    name = "toolrl_format"

    def __init__(self, template: str = "toolrl", format_mode: str = "strict") -> None:
        super().__init__(template, format_mode)
        self.calls_iff_expected = get_grammar(self.grammar).response is not None

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        parsed = self.parsed(ctx)
        if not parsed.format_ok:
            return 0.0
        if self.calls_iff_expected and (parsed.calls != []) != bool(gold):
            return 0.0
        return 1.0


class ToolRLCorrectnessReward(Reward):
    """R_correct in [-3, 3]; calls are read leniently so a format slip is punished by R_format only."""

    name = "toolrl_correctness"
    lo, hi = -3.0, 3.0

    def __init__(self, template: str = "toolrl", format_mode: str = "strict") -> None:
        super().__init__(template, format_mode)

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        parsed = self.parsed(ctx)
        calls = parsed.calls if parsed.calls is not None else ctx.get(self.grammar, LENIENT).calls
        return toolrl_correctness(calls, gold)


class ToolRLReward(Reward):
    """R_format + R_correct in [-3, 4]."""

    name = "toolrl"
    lo, hi = -3.0, 4.0

    def __init__(self, template: str = "toolrl", format_mode: str = "strict") -> None:
        super().__init__(template, format_mode)
        self._terms = (
            ToolRLFormatReward(self.grammar, format_mode),
            ToolRLCorrectnessReward(self.grammar, format_mode),
        )

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        return sum(term.score(ctx, gold) for term in self._terms)
