"""Selection rules of the efficiency paper: hand-computed cases plus brute-force properties."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooltune.training.selection import (
    PromptFilter,
    group_advantages,
    group_stats,
    is_zero_variance,
    max_variance_subset,
    select_rollouts,
)


def _var(xs: list[float]) -> float:
    mu = sum(xs) / len(xs)
    return sum((x - mu) ** 2 for x in xs) / len(xs)


# ------------------------------------------------------------------ Eq. 7: max-variance down-sampling
def test_binary_rewards_keep_half_of_each_class() -> None:
    # 3 correct, 5 wrong, m = 4: two of each (variance 0.25) beats 3+1 (0.1875); earliest of each class.
    assert max_variance_subset([1, 1, 1, 0, 0, 0, 0, 0], 4) == [0, 1, 3, 4]


def test_binary_rewards_with_one_correct_keep_it() -> None:
    # Only one correct rollout: it must survive; the rest are the earliest wrong ones.
    assert max_variance_subset([0, 0, 1, 0], 2) == [0, 2]
    assert max_variance_subset([0, 0, 0, 1, 0, 0], 4) == [0, 1, 2, 3]


def test_continuous_rewards_take_the_extremes() -> None:
    # {0.1, 0.9} has variance 0.16, the largest of any pair.
    assert max_variance_subset([0.2, 0.9, 0.5, 0.1], 2) == [1, 3]
    # m = 3 of [0, 4, 5, 10]: {0, 5, 10} (var 16.67) and {0, 4, 10} (var 16.89): the latter wins.
    assert max_variance_subset([0, 4, 5, 10], 3) == [0, 1, 3]


def test_unbalanced_split_when_it_has_more_variance() -> None:
    # rewards 0, 0, 0, 10, 10.5, 11 and m = 3: {0, 10.5, 11} has var 25.7, {0, 0, 11} var 26.9 (the max).
    assert max_variance_subset([0, 0, 0, 10, 10.5, 11], 3) == [0, 1, 5]


def test_nan_rewards_are_used_only_to_fill() -> None:
    assert max_variance_subset([float("nan"), 1, 0, 1], 2) == [1, 2]
    assert max_variance_subset([float("nan"), float("nan"), 1, 1], 3) == [0, 2, 3]


def test_edge_sizes() -> None:
    assert max_variance_subset([1, 0, 1], 0) == []
    assert max_variance_subset([1, 0, 1], 3) == [0, 1, 2]
    assert max_variance_subset([1, 0, 1], 5) == [0, 1, 2]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.2, 0.5, 1.0, 3.0, -1.0]), min_size=2, max_size=8), st.data())
def test_subset_variance_is_the_brute_force_maximum(rewards: list[float], data: st.DataObject) -> None:
    m = data.draw(st.integers(1, len(rewards)))
    got = max_variance_subset(rewards, m)
    assert len(got) == m and got == sorted(set(got))
    best = max(_var([rewards[i] for i in c]) for c in itertools.combinations(range(len(rewards)), m))
    assert math.isclose(_var([rewards[i] for i in got]), best, abs_tol=1e-9)


def test_select_rollouts_per_group_and_zero_variance_drop() -> None:
    rewards = [1, 0, 1, 0, 1, 1, 1, 1]  # group 0 mixed, group 1 all correct (zero variance)
    assert select_rollouts(rewards, 4, 2) == [0, 1, 4, 5]
    assert select_rollouts(rewards, 4, 2, drop_zero_variance=True) == [0, 1]
    assert select_rollouts(rewards, 4, 4, drop_zero_variance=True) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="groups of 3"):
        select_rollouts(rewards, 3, 2)


def test_group_advantages_hand_computed() -> None:
    # group [1, 0]: mean 0.5, unbiased std 0.7071 -> +-0.5 / (0.7071 + 1e-4)
    adv = group_advantages([1.0, 0.0, 1.0, 1.0], [0, 0, 1, 1])
    expected = 0.5 / (math.sqrt(0.5) + 1e-4)
    assert adv[0] == pytest.approx(expected) and adv[1] == pytest.approx(-expected)
    assert adv[2] == 0.0 and adv[3] == 0.0  # zero-variance group
    assert group_advantages([1.0, 0.0], [0, 0], scale="none") == [0.5, -0.5]
    assert group_advantages([float("nan"), 1.0, 0.0], [0, 0, 0], scale="none") == [0.0, 0.5, -0.5]
    with pytest.raises(ValueError, match="group, batch, none"):
        group_advantages([1.0], [0], scale="rank")


def test_group_stats_and_zero_variance() -> None:
    stats = group_stats([1, 1, 0, 0, 1, 0, 0.5, 0.5], 2, max_reward=1.0)
    assert stats.groups == 4
    assert stats.zero_variance == 0.75 and stats.all_correct == 0.25 and stats.all_wrong == 0.25
    assert is_zero_variance([0.3, 0.3]) and not is_zero_variance([0.3, 0.4])
    assert is_zero_variance([float("nan"), 1.0])


# ------------------------------------------------------------------ Eq. 4-6: pre-rollout filtering
def test_prompt_filter_streaks_and_skips() -> None:
    f = PromptFilter(k=2, max_reward=1.0)
    # epoch 1: prompt 7 fully solved, prompt 3 not
    f.update([7, 7, 3, 3], [1.0, 1.0, 1.0, 0.0], group_size=2)
    assert f.streaks == {7: 1, 3: 0}
    assert f.kept([3, 7, 9]) == [3, 7, 9]  # streak 1 < k = 2
    # epoch 2: prompt 7 solved again -> streak 2 -> skipped from epoch 3; prompt 3 solved once
    f.update([3, 3, 7, 7], [1.0, 1.0, 1.0, 1.0], group_size=2)
    assert f.streaks == {7: 2, 3: 1}
    assert f.kept([3, 7, 9]) == [3, 9]
    assert f.kept([3, 7, 9]) == [3, 9]  # no new evidence: the skip persists
    # a failure resets the streak (Eq. 5)
    f.update([3, 3], [1.0, 0.5], group_size=2)
    assert f.streaks[3] == 0


def test_prompt_filter_k1_reset_after_skip_and_state_roundtrip() -> None:
    f = PromptFilter(k=1, reset_after_skip=True)
    f.update([0, 0, 1, 1], [1, 1, 0, 1], group_size=2)
    assert f.kept(range(2)) == [1]
    assert f.kept(range(2)) == [0, 1]  # reset: back one epoch later
    g = PromptFilter(k=1)
    g.update([5, 5], [1, 1], group_size=2)
    h = PromptFilter(k=1)
    h.load_state_dict(g.state_dict())
    assert h.streaks == {5: 1} and h.kept([5, 6]) == [6]


def test_prompt_filter_counts_repeated_groups_of_one_batch_once() -> None:
    # A batch that repeats its prompts (fewer left than it holds) is one epoch's evidence per prompt.
    f = PromptFilter(k=2)
    assert f.update([4, 4, 4, 4], [1.0, 1.0, 1.0, 1.0], group_size=2) == 2
    assert f.streaks == {4: 1} and f.kept([4]) == [4]  # one solved epoch, not two
    f.update([4, 4, 4, 4], [1.0, 1.0, 1.0, 0.0], group_size=2)
    assert f.streaks == {4: 0}  # one unsolved group: the prompt was not solved that epoch


def test_prompt_filter_rejects_mixed_groups() -> None:
    with pytest.raises(ValueError, match="mix prompts"):
        PromptFilter().update([1, 2], [1.0, 1.0], group_size=2)
    with pytest.raises(ValueError, match="multiple of group_size"):
        PromptFilter().update([1, 1, 1], [1.0, 1.0, 1.0], group_size=2)
