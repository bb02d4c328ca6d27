"""Equal compute: the clocks a time budget counts, and training curves on them.

A comparison "at equal time" between GRPO and continued SFT (the quickstart) or between GRPO variants
(`bench/ablations.py`, `bench/efficiency.py`) must not depend on what else runs on the machine. Wall
time does: on two cores shared with other jobs a step takes longer and fewer steps fit a budget. The
`cpu` clock counts this process's CPU time (`time.process_time()`, every thread of the process), which
other processes do not change. Use one torch thread per job on shared cores: spinning OpenMP threads
that wait for a core burn CPU time without progress. On a GPU the CPU time counts only the host's
share of the work; there, with the device to itself, wall time is the measure (`wall`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tooltune.config import Registry


@dataclass(frozen=True)
class Clock:
    """A clock a time budget counts on: how to read it, and what it counts (the reports print this)."""

    read: Callable[[], float]
    counts: str


CLOCKS: Registry[Clock] = Registry("clock")
CLOCKS.add("cpu", Clock(time.process_time,
                        "process CPU time (time.process_time: all threads of the process)"))
CLOCKS.add("wall", Clock(time.perf_counter, "wall-clock time (time.perf_counter)"))

TRAIN_KEYS = {"cpu": "train_cpu_s", "wall": "train_wall_s"}
"""Clock -> the key of a GRPO summary (`training.diagnostics.grpo_summary`) holding its training time."""

SCREEN_KEYS = {"cpu": "cpu_s", "wall": "wall_s"}
"""Clock -> the key of the screen stage's result (`tooltune.experiment.screen`) holding its cost."""


def now(clock: str) -> float:
    """The current reading of `clock` (a name in `CLOCKS`) in seconds."""
    return CLOCKS[clock].read()


def grpo_curve(summary: dict[str, Any], clock: str) -> list[dict[str, Any]]:
    """A GRPO run's validation curve (`summary["curve"]`) with "t" = its training time on `clock`
    (held-out evaluations excluded), read from the per-step log records; the curve's first point (the
    warm start, before any step) is at 0."""
    if clock == "wall":
        return [{**p, "t": p["train_s"]} for p in summary["curve"]]
    cpu = {r["step"]: r["train_cpu_s"] for r in summary.get("log", []) if "train_cpu_s" in r}
    curve = summary["curve"]
    return [{**p, "t": cpu.get(p["step"], 0.0)} for p in curve if p["step"] == 0 or p["step"] in cpu]


class BudgetWatch:
    """Stops an `SFTLoop` once `budget` seconds of `clock` were spent training, and evaluates at given
    training times on the way (`marks`: GRPO's evaluation times, so both curves share their x values).

    Use as the loop's budget and its callback with `every=1` (`loop.train(budget=watch, every=1,
    callback=watch)`: the progress bar then counts the budget's seconds); the time spent inside the
    callback (the evaluations) is not training time. `points` collects {"step", "t", "accuracy"}: one
    per mark passed, and one at the end (none at all without marks)."""

    def __init__(
        self,
        clock: str,
        budget: float,
        marks: Sequence[float] = (),
        evaluate: Callable[[Any], float] | None = None,
    ) -> None:
        self.clock, self.budget = clock, budget
        self.marks = sorted(m for m in marks if 0 < m <= budget)
        self.curve = bool(self.marks)  # evaluate at the marks and when the budget is spent
        self.evaluate = evaluate
        self.points: list[dict[str, Any]] = []
        self.start = now(clock)
        self.excluded = 0.0

    @property
    def spent(self) -> float:
        """Training time so far on the clock (evaluations excluded)."""
        return now(self.clock) - self.start - self.excluded

    def __call__(self, loop: Any) -> bool:
        spent = self.spent
        done = spent >= self.budget
        if self.evaluate is not None and self.curve and (done or (self.marks and spent >= self.marks[0])):
            while self.marks and self.marks[0] <= spent:
                self.marks.pop(0)
            t = now(self.clock)
            acc = self.evaluate(loop)
            self.excluded += now(self.clock) - t
            self.points.append({"step": loop.step, "t": spent, "accuracy": acc})
        return done
