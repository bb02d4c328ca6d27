"""`tooltune report RUN_DIR`: plots and summary from a metrics file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest


def _write_run(run: Path) -> None:
    run.mkdir()
    recs = [{"stage": "sft", "step": s, "loss": 1.0 / s} for s in (1, 2)]
    for s in range(1, 5):
        recs.append(
            {
                "stage": "grpo",
                "step": s,
                "reward": 0.1 * s,
                "rewards/binary/mean": 0.1 * s,
                "tooltune/zero_variance_share": 0.5,
                "tooltune/rollout_time": 2.0,
                "tooltune/update_time": 1.0,
                "tooltune/rollouts_generated": 16.0,
                "tooltune/rollouts_dropped": 8.0,
                "tooltune/tokens_saved": 100.0,
                "tooltune/entropy_reasoning": 2.0,
                "tooltune/entropy_tool_call": 1.0,
                "loss": 0.01,
            }
        )
    recs.append({"stage": "grpo", "step": 4, "tooltune/heldout_exact_match": 0.25,
                 "tooltune/heldout_samples": 200})
    text = "".join(json.dumps(r) + "\n" for r in recs) + '{"stage": "grpo", "st'  # a line cut by a kill
    (run / "metrics.jsonl").write_text(text)


def test_report_writes_plots_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tooltune.cli import main
    from tooltune.training.report import summarize

    run = tmp_path / "run"
    _write_run(run)
    s = summarize(run)
    assert s["grpo_steps"] == 4 and s["sft_steps"] == 2
    assert s["rollout_seconds"] == pytest.approx(8.0) and s["update_seconds"] == pytest.approx(4.0)
    assert s["rollouts_generated"] == 64 and s["rollouts_dropped"] == 32 and s["heldout"] == [(4, 0.25)]
    assert main(["report", str(run)]) == 0
    out = run / "report"
    for name in (
        "reward.png",
        "groups.png",
        "time.png",
        "entropy.png",
        "validation.png",
        "loss.png",
        "summary.md",
    ):
        assert (out / name).is_file() and (out / name).stat().st_size > 0
    md = (out / "summary.md").read_text()
    assert "| GRPO steps | 4 |" in md and "![time](time.png)" in md
    assert "summary.md" in capsys.readouterr().out


def test_report_on_a_folder_without_metrics(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tooltune.cli import main

    assert main(["report", str(tmp_path)]) == 2
    assert "no metrics" in capsys.readouterr().err


def test_report_on_garbage_metrics_is_an_error_not_an_empty_report(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from tooltune.cli import main

    (tmp_path / "metrics.jsonl").write_bytes(bytes(range(256)) * 12)
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "metrics.jsonl: no metrics record" in err and "line 1" in err
    (tmp_path / "metrics.jsonl").write_text('{"a": 1}\nnot json\n[1, 2]\n')
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r" / "summary.md").exists()


def test_report_skips_a_torn_line_and_refuses_an_unwritable_out(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from tooltune.cli import main

    good = '{"stage": "grpo", "step": 1, "reward": 0.5}\n'
    (tmp_path / "metrics.jsonl").write_text(good + '{"stage": "grpo", "st')
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 0
    assert "| GRPO steps | 1 |" in (tmp_path / "r" / "summary.md").read_text()
    (tmp_path / "file").write_text("x")
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "file" / "r")]) == 2
    assert "--out" in capsys.readouterr().err


def _noisy_run(run: Path, steps: int = 60) -> list[float]:
    """A GRPO metrics file whose reward jumps step to step (binary rewards of a few prompts), logged the
    way training logs it: the total, TRL's mean of tooltune's one reward function, and the component."""
    import random

    rng = random.Random(0)
    rewards = [min(1.0, max(0.0, 0.3 + 0.004 * s + rng.uniform(-0.3, 0.3))) for s in range(1, steps + 1)]
    recs = [{"stage": "grpo", "step": s, "reward": r, "rewards/tooltune/mean": r, "rewards/binary/mean": r}
            for s, r in enumerate(rewards, 1)]
    recs += [{"stage": "grpo", "step": s, "tooltune/heldout_exact_match": a, "tooltune/heldout_samples": 200}
             for s, a in ((0, 0.445), (20, 0.535), (40, 0.57), (60, 1.0))]
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return rewards


def test_the_reward_plot_draws_the_raw_curve_beside_its_moving_average_once(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from tooltune.training.report import draw_reward, load_metrics, moving_average, summarize

    rewards = _noisy_run(tmp_path / "run")
    fig, ax = plt.subplots()
    try:
        assert draw_reward(ax, load_metrics(tmp_path / "run"))
        lines = {line.get_label(): line for line in ax.get_lines()}
        # total, TRL's per-function mean and the one component are the same numbers: drawn once
        assert list(lines) == ["total (= binary), per step", "total (= binary), mean of the last 6 steps"]
        average = lines["total (= binary), mean of the last 6 steps"]
        assert list(average.get_ydata()) == pytest.approx(moving_average(rewards, 6))
        assert list(average.get_xdata()) == list(range(6, 61))
        s = summarize(tmp_path / "run")
        assert s["reward_window"] == 6
        assert s["reward_first"] == pytest.approx(sum(rewards[:6]) / 6) == average.get_ydata()[0]
        assert s["reward_last"] == pytest.approx(sum(rewards[-6:]) / 6) == average.get_ydata()[-1]
        assert f"{s['reward_first']:.3g} → {s['reward_last']:.3g}" in ax.get_title()
    finally:
        plt.close(fig)


def test_the_report_and_the_quickstart_give_one_training_reward_definition(tmp_path: Path) -> None:
    from tooltune.training.diagnostics import grpo_summary
    from tooltune.training.report import summarize

    _noisy_run(tmp_path / "run")
    quickstart, report = grpo_summary(tmp_path / "run" / "metrics.jsonl"), summarize(tmp_path / "run")
    for key in ("reward_first", "reward_last", "reward_window"):
        assert quickstart[key] == report[key], key


def test_the_validation_curve_has_standard_errors_on_a_labelled_full_axis(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from tooltune.cli import main
    from tooltune.training.report import draw_validation, load_metrics

    _noisy_run(tmp_path / "run")
    fig, ax = plt.subplots()
    try:
        assert draw_validation(ax, load_metrics(tmp_path / "run"))
        bottom, top = ax.get_ylim()
        assert bottom < 0 and top > 100  # the whole 0-100% scale, 0% and 100% points visible
        (container,) = ax.containers
        segments = container.lines[2][0].get_segments()
        half = [(seg[1][1] - seg[0][1]) / 2 for seg in segments]
        assert half == pytest.approx([100 * math.sqrt(a * (1 - a) / 200) for a in (0.445, 0.535, 0.57, 1.0)])
        assert container.get_label() == "validation (200 samples), ± 1 standard error"
    finally:
        plt.close(fig)
    assert main(["report", str(tmp_path / "run")]) == 0
    md = (tmp_path / "run" / "report" / "summary.md").read_text()
    assert "| validation exact match (best) | 1 |" in md and "held-out" not in md.lower()
    assert "| training reward (mean of the first → last 6 steps) |" in md
    assert not (tmp_path / "run" / "report" / "entropy.png").exists()  # no data, no empty chart


def test_the_validation_plot_draws_the_call_and_no_call_rows_dashed_where_logged() -> None:
    import matplotlib.pyplot as plt

    from tooltune.training.report import VALIDATION_KEY, VALIDATION_PART_KEYS, draw_validation

    call, no_call = VALIDATION_PART_KEYS["call"], VALIDATION_PART_KEYS["no_call"]
    records = [{"step": s, VALIDATION_KEY: a, call: c, no_call: n}
               for s, a, c, n in ((0, 0.25, 0.2, 0.5), (4, 0.25, 0.0, 1.0))]
    fig, ax = plt.subplots()
    try:
        assert draw_validation(ax, records)
        dashed = {ln.get_label(): list(ln.get_ydata()) for ln in ax.lines if ln.get_linestyle() == "--"}
        assert dashed == {"validation: rows expecting a call": [20.0, 0.0],
                          "validation: rows expecting no call": [50.0, 100.0]}
        ax.clear()
        assert draw_validation(ax, [{k: v for k, v in r.items() if k in ("step", VALIDATION_KEY)}
                                    for r in records])
        assert not [line for line in ax.lines if line.get_linestyle() == "--"]
    finally:
        plt.close(fig)
