"""`tooltune report RUN_DIR`: plots and summary from a metrics file."""

from __future__ import annotations

import json
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
    recs.append({"stage": "grpo", "step": 4, "tooltune/heldout_exact_match": 0.25})
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
        "heldout.png",
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
