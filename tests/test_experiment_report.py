"""The synthetic profile's report: the accuracy figure."""

from __future__ import annotations

import math

import pytest

from tooltune.experiment.config import DEFAULT_CONFIG, load_config


def test_the_accuracy_figure_shows_validation_with_standard_errors_on_labelled_full_axes() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tooltune.experiment.report import accuracy_figure

    cfg = load_config(DEFAULT_CONFIG).to_dict()  # SFT checks 100 validation samples, GRPO's curve 200
    results = {
        "data": {"sizes": {"val": 200}},
        "sft": {"chosen_step": 600, "curve": [{"step": 500, "val_accuracy": 0.3},
                                              {"step": 600, "val_accuracy": 0.46}]},
        "grpo": {"curve": [{"step": 0, "accuracy": 0.445, "call": 0.4, "no_call": 0.6},
                           {"step": 20, "accuracy": 0.535, "call": 0.5, "no_call": 0.65}],
                 "log": [{"step": 20, "train_cpu_s": 31.0}]},
        "sft_continued": {"curve": [{"step": 600, "t": 0.0, "accuracy": 0.445},
                                    {"step": 800, "t": 31.2, "accuracy": 0.5}]},
    }
    fig = accuracy_figure(plt, cfg, results)
    try:
        sft_ax, grpo_ax = fig.axes
        assert "Validation" in fig._suptitle.get_text() and "standard error" in fig._suptitle.get_text()
        assert sft_ax.get_ylabel() == "greedy exact match (%)"
        assert sft_ax.get_xlabel() == "SFT step"
        assert grpo_ax.get_xlabel() == "training cpu time from the warm start (s)"
        grpo_bars, continued_bars = grpo_ax.containers  # both curves on the clock of the comparison
        assert grpo_bars.get_label().startswith("GRPO")
        assert continued_bars.get_label().startswith("SFT continued")
        xs = [seg[0][0] for seg in grpo_bars.lines[2][0].get_segments()]
        assert xs == [0.0, 31.0]  # GRPO's points at their training CPU time
        for ax, n, acc in ((sft_ax, 100, (0.3, 0.46)), (grpo_ax, 200, (0.445, 0.535))):
            bottom, top = ax.get_ylim()
            assert bottom < 0 and top > 100
            bars = ax.containers[0]
            half = [(seg[1][1] - seg[0][1]) / 2 for seg in bars.lines[2][0].get_segments()]
            assert half == pytest.approx([100 * math.sqrt(a * (1 - a) / n) for a in acc])
            assert f"({n} samples), ± 1 standard error" in bars.get_label()
        assert sft_ax.get_xlim()[0] == 0  # SFT from its first step, the warm start marked
        assert any(line.get_label() == "warm start (step 600)" for line in sft_ax.get_lines())
        dashed = {ln.get_label(): list(ln.get_ydata()) for ln in grpo_ax.get_lines()
                  if ln.get_linestyle() == "--"}  # the parts of GRPO's validation rows
        assert dashed == {"GRPO: rows expecting a call": [40.0, 50.0],
                          "GRPO: rows expecting no call": [60.0, 65.0]}
    finally:
        plt.close(fig)
