"""Progress bars of training phases bounded by a time budget.

A phase bounded by steps shows its steps. A phase bounded by a time budget (the quickstart's
continued SFT, GRPO under `grpo.max_seconds`) shows the budget instead: the bar's total is the budget
in seconds on the run's clock (``cpu`` or ``wall``), it advances by the seconds each step took on that
clock, and the step count stands in the postfix. A step total would be a guess, and the bar's
remaining-time estimate would be as wrong as the guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from tqdm.auto import tqdm

BUDGET_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}{postfix}]"


class SecondsBar(tqdm):
    """A tqdm bar counting seconds, shown with one decimal (tqdm prints a float count with all its
    digits). The last step may pass the total: the bar is then full and the count shows the seconds
    spent (tqdm would drop the bar and the percentage)."""

    @property
    def format_dict(self) -> dict[str, Any]:
        shown = super().format_dict
        n, total = shown["n"], shown["total"]
        return {**shown, "n": min(n, total), "n_fmt": f"{n:.1f}", "total_fmt": f"{total:.1f}"}


class TimeBudget(Protocol):
    """Seconds of one clock a phase may train for (`tooltune.experiment.compute.BudgetWatch` is one)."""

    clock: str
    """The clock the seconds are counted on: ``cpu`` or ``wall``."""
    budget: float
    """Seconds in all."""

    @property
    def spent(self) -> float:
        """Seconds used so far."""
        ...


class SecondsOf:
    """A `TimeBudget` of `budget` seconds of a counter of seconds (`read`), counted from now."""

    def __init__(self, clock: str, budget: float, read: Callable[[], float]) -> None:
        self.clock, self.budget, self.read = clock, budget, read
        self.start = read()

    @property
    def spent(self) -> float:
        return self.read() - self.start


def budget_bar(desc: str | None, budget: float, clock: str, spent: float = 0.0, disable: bool = False) -> Any:
    """A tqdm bar of `budget` seconds on `clock`, `spent` of them already used (a resumed run)."""
    return SecondsBar(total=budget, initial=spent, desc=desc, unit=f"{clock} s", bar_format=BUDGET_FORMAT,
                      disable=disable)


def phase_bar(desc: str | None, steps: int | None, budget: TimeBudget | None) -> Any:
    """The bar of a phase: of `budget`'s seconds when it has one, else of `steps` (None: no total);
    hidden when `desc` is None."""
    if budget is None:
        return tqdm(total=steps, desc=desc, unit="step", disable=desc is None)
    return budget_bar(desc, budget.budget, budget.clock, budget.spent, disable=desc is None)


def show_progress(bar: Any, spent: float | None, steps: int, postfix: Mapping[str, str]) -> None:
    """After a step: move a budget's bar to the `spent` seconds (the step count beside them), or, with
    `spent` None, a step bar by one step; `postfix` goes beside either."""
    if spent is not None:
        postfix = {"steps": str(steps), **postfix}
    bar.set_postfix(postfix, refresh=False)  # before the update, which redraws the bar
    bar.update(1 if spent is None else spent - bar.n)
