"""Progress bars of budgeted training phases: seconds on the run's clock, the step count beside them."""

from __future__ import annotations

from tooltune.training.progress import SecondsOf, budget_bar, phase_bar, show_progress


def test_a_budget_bar_shows_seconds_with_one_decimal_even_past_its_total(capsys) -> None:
    counter = [3.0]
    budget = SecondsOf("wall", 2.0, lambda: counter[0])
    bar = budget_bar("phase", budget.budget, budget.clock, budget.spent)
    for seconds in (0.7, 0.7, 1.1):  # the last step passes the 2 s budget
        counter[0] += seconds
        show_progress(bar, budget.spent, 3, {"loss": "0.500"})
    bar.close()
    assert round(budget.spent, 6) == 2.5 == round(bar.n, 6)
    last = capsys.readouterr().err.rsplit("phase: ", 1)[1]
    assert last.startswith("100%|██████████| 2.5/2.0 wall s [") and "steps=3, loss=0.500]" in last


def test_a_phase_without_a_budget_counts_steps() -> None:
    bar = phase_bar("sft", 5, None)
    show_progress(bar, None, 1, {"loss": "1.000"})
    assert (bar.total, bar.n, bar.unit, bar.postfix) == (5, 1, "step", "loss=1.000")
    bar.close()
    assert phase_bar(None, 5, None).disable  # no name: no bar drawn
