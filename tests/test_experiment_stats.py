"""The experiment's statistics: binomial standard errors and paired differences."""

from __future__ import annotations

import math

from tooltune.experiment import stats


def test_binomial_and_paired_statistics_match_hand_computation() -> None:
    b = stats.binomial([1, 0, 1, 1])
    assert b["accuracy"] == 0.75 and math.isclose(b["se"], math.sqrt(0.75 * 0.25 / 4))
    d = stats.paired([1, 1, 1, 0], [0, 1, 0, 0])  # differences 1, 0, 1, 0: mean 0.5, sd 0.57735
    assert d["diff"] == 0.5
    assert math.isclose(d["se"], math.sqrt((4 * 0.25) / 3 / 4))
    assert math.isclose(d["z"], 0.5 / d["se"])
