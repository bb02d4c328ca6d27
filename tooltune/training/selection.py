"""Engine-independent rollout and prompt selection rules (efficiency paper, arXiv 2606.00135).

Everything here is pure Python on plain lists so it can be called from the TRL subclass in
`tooltune.training.grpo`, from a verl sampler / replay buffer, or from a notebook.

Online pre-rollout filtering (their Eq. 4-6). For prompt i after epoch e, with n rollouts r_ij:

    s_i^(e) = 1[ min_j r_ij >= r_max ]                      (Eq. 4: the prompt was fully solved)
    c_i^(e) = (c_i^(e-1) + 1) * s_i^(e)                     (Eq. 5: consecutive solved epochs)
    skip prompt i in epoch e+1  <=>  c_i^(e) >= k           (Eq. 6)

A skipped prompt gets no rollouts, so there is no new evidence and its count stays (the skip is
permanent) unless `reset_after_skip` is set, which zeroes the count so the prompt returns one epoch
later.

Max-variance rollout down-sampling (their Eq. 7, after Xu et al. 2025): from n rewards keep the m
whose sample variance is largest. The maximiser is always "the m' lowest and the m - m' highest"
rewards for some m' in [0, m], so trying the m + 1 splits of the sorted rewards is exact. With binary
rewards this keeps m/2 of each class when both classes have that many members.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

_EPS = 1e-9


def _variance(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


def max_variance_subset(rewards: Sequence[float], m: int) -> list[int]:
    """Indices (ascending) of the m rewards with maximal population variance (Eq. 7).

    Ties between splits go to the split whose low/high counts are most balanced (m' closest to m/2);
    ties between equal rewards go to the earlier rollout (rollouts are i.i.d., so this is unbiased).
    NaN rewards (unscorable rollouts, advantage 0 in TRL) are kept only when fewer than m are finite.
    """
    n = len(rewards)
    if m <= 0:
        return []
    if m >= n:
        return list(range(n))
    finite = [i for i in range(n) if rewards[i] == rewards[i]]
    if len(finite) <= m:
        unscorable = [i for i in range(n) if rewards[i] != rewards[i]]
        return sorted(finite + unscorable[: m - len(finite)])
    vals = {i: float(rewards[i]) for i in finite}
    ascending = sorted(finite, key=lambda i: (vals[i], i))
    descending = sorted(finite, key=lambda i: (-vals[i], i))

    def split(low: int) -> list[int]:
        lows = ascending[:low]
        taken = set(lows)
        return lows + [i for i in descending if i not in taken][: m - low]

    best_key, best = None, []
    for low in range(m + 1):
        chosen = split(low)
        key = (round(_variance([vals[i] for i in chosen]), 12), -abs(low - m / 2), -low)
        if best_key is None or key > best_key:
            best_key, best = key, chosen
    return sorted(best)


def is_zero_variance(rewards: Sequence[float], tol: float = _EPS) -> bool:
    finite = [r for r in rewards if r == r]
    return not finite or max(finite) - min(finite) <= tol


def select_rollouts(
    rewards: Sequence[float], group_size: int, m: int, drop_zero_variance: bool = False
) -> list[int]:
    """Flat row indices to keep from consecutive groups of `group_size` rewards.

    Each group keeps `max_variance_subset(group, m)`; zero-variance groups are dropped entirely when
    `drop_zero_variance` (their GRPO advantages are all zero, so they only cost compute).
    """
    if group_size <= 0 or len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    keep: list[int] = []
    for start in range(0, len(rewards), group_size):
        group = rewards[start : start + group_size]
        if drop_zero_variance and is_zero_variance(group):
            continue
        keep.extend(start + i for i in max_variance_subset(group, m))
    return keep


def group_advantages(
    rewards: Sequence[float], group_ids: Sequence[int], scale: str = "group", eps: float = 1e-4
) -> list[float]:
    """GRPO advantages (r - mean_g) / (std_g + eps) over the rows that share a group id.

    scale: "group" divides by the group's (unbiased) std as TRL does, "batch" by the std of all rows,
    "none" only centers (Dr. GRPO). NaN rewards get advantage 0 and are left out of the statistics.
    """
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale must be one of group, batch, none; got {scale!r}")
    groups: dict[int, list[float]] = {}
    for r, g in zip(rewards, group_ids, strict=True):
        if r == r:
            groups.setdefault(g, []).append(float(r))

    def std(vals: list[float]) -> float:
        if len(vals) < 2:
            return 0.0
        mean = sum(vals) / len(vals)
        return (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5

    batch_std = std([r for vals in groups.values() for r in vals])
    out = []
    for r, g in zip(rewards, group_ids, strict=True):
        if r != r:
            out.append(0.0)
            continue
        vals = groups[g]
        adv = r - sum(vals) / len(vals)
        if scale == "group":
            adv /= std(vals) + eps
        elif scale == "batch":
            adv /= batch_std + eps
        out.append(adv)
    return out


@dataclass
class GroupStats:
    """Shares of prompts (groups) per step: zero variance, all at max reward, all at min reward."""

    groups: int
    zero_variance: float
    all_correct: float
    all_wrong: float


def group_stats(
    rewards: Sequence[float], group_size: int, max_reward: float, min_reward: float = 0.0, tol: float = 1e-6
) -> GroupStats:
    """Diagnostics of the efficiency paper (Fig. 3): how many groups carry no learning signal."""
    n_groups = len(rewards) // group_size if group_size else 0
    zv = ac = aw = 0
    for start in range(0, n_groups * group_size, group_size):
        group = rewards[start : start + group_size]
        zv += is_zero_variance(group)
        ac += all(r == r and r >= max_reward - tol for r in group)
        aw += all(r == r and r <= min_reward + tol for r in group)
    d = max(n_groups, 1)
    return GroupStats(n_groups, zv / d, ac / d, aw / d)


@dataclass
class PromptFilter:
    """Per-prompt streaks of fully solved epochs (Eq. 4-6), keyed by an integer prompt index.

    `update` must see every rollout of a group together (gathered across processes) so that every
    rank holds the same state; `kept` is evaluated once at each epoch start.
    """

    k: int = 1
    max_reward: float = 1.0
    tol: float = 1e-6
    reset_after_skip: bool = False
    streaks: dict[int, int] = field(default_factory=dict)
    skipped_total: int = 0

    def update(self, prompt_indices: Sequence[int], rewards: Sequence[float], group_size: int) -> int:
        """Update streaks from consecutive groups of `group_size` rollouts; returns groups seen.

        Several groups of one prompt in one call (a batch that repeats its prompts because fewer are
        left than it holds) are one epoch's evidence: the prompt counts as solved once, if all its
        rollouts are.
        """
        if len(prompt_indices) != len(rewards) or len(rewards) % group_size:
            raise ValueError("prompt_indices and rewards must have equal length, a multiple of group_size")
        solved: dict[int, bool] = {}
        for start in range(0, len(rewards), group_size):
            ids = set(int(p) for p in prompt_indices[start : start + group_size])
            if len(ids) != 1:
                raise ValueError(f"rollouts {start}..{start + group_size - 1} mix prompts {sorted(ids)}")
            idx = ids.pop()
            group_solved = all(
                r == r and r >= self.max_reward - self.tol for r in rewards[start : start + group_size]
            )
            solved[idx] = solved.get(idx, True) and group_solved
        for idx, ok in solved.items():
            self.streaks[idx] = self.streaks.get(idx, 0) + 1 if ok else 0
        return len(rewards) // group_size

    def kept(self, indices: Iterable[int]) -> list[int]:
        """Indices that get rollouts this epoch (Eq. 6); call once per epoch start."""
        keep, skipped = [], []
        for i in indices:
            (skipped if self.streaks.get(int(i), 0) >= self.k else keep).append(int(i))
        self.skipped_total += len(skipped)
        if self.reset_after_skip:
            for i in skipped:
                self.streaks[i] = 0
        return keep

    def state_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "max_reward": self.max_reward,
            "tol": self.tol,
            "reset_after_skip": self.reset_after_skip,
            "skipped_total": self.skipped_total,
            "streaks": {str(k): v for k, v in self.streaks.items() if v},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.streaks = {int(k): int(v) for k, v in state.get("streaks", {}).items()}
        self.skipped_total = int(state.get("skipped_total", 0))
