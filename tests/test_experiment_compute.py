"""Equal compute: the budget watch on a clock, and GRPO's curve on the chosen clock."""

from __future__ import annotations

import pytest

from tooltune.config import UnknownName


def test_the_budget_watch_stops_on_the_clock_and_leaves_evaluations_out(monkeypatch) -> None:
    from tooltune.experiment import compute

    clock = {"t": 100.0}
    monkeypatch.setattr(compute, "now", lambda name: clock["t"])
    evaluated: list[float] = []

    def evaluate(loop) -> float:
        evaluated.append(clock["t"])
        clock["t"] += 50.0  # a slow evaluation: not training time
        return 0.5

    watch = compute.BudgetWatch("cpu", budget=3.0, marks=[1.0, 2.0, 9.0], evaluate=evaluate)
    loop = type("Loop", (), {"step": 0})()
    stops = []
    for _ in range(10):
        clock["t"] += 0.7  # one training step
        loop.step += 1
        stops.append(watch(loop))
        if stops[-1]:
            break
    assert stops == [False, False, False, False, True]  # 5 steps of 0.7 s pass the 3 s budget
    assert [round(p["t"], 1) for p in watch.points] == [1.4, 2.1, 3.5]  # the marks, then the end
    assert watch.marks == [] and round(watch.spent, 1) == 3.5  # the 9 s mark is past the budget
    monkeypatch.undo()
    with pytest.raises(UnknownName, match=r"clock: unknown clock 'gpu' .*; registered: cpu, wall"):
        compute.now("gpu")


def test_grpo_curve_reads_each_points_time_on_the_chosen_clock() -> None:
    from tooltune.experiment.compute import grpo_curve

    summary = {"curve": [{"step": 0, "train_s": 0.01, "accuracy": 0.4},
                         {"step": 20, "train_s": 40.0, "accuracy": 0.5}],
               "log": [{"step": 20, "train_cpu_s": 30.0}]}
    assert [p["t"] for p in grpo_curve(summary, "wall")] == [0.01, 40.0]
