"""bench/continued_sft.py trains the continued-SFT rival beside GRPO: it stops at the budget the run's
`sft_continued` stage would use once GRPO has finished, or takes the first saved mark at or past it when it
had already trained longer, and leaves the stage finished for the evaluation."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import bench_module

from tooltune.cli import main

MINI = Path(__file__).resolve().parents[1] / "configs" / "quickstart_real_smollm2_mini.yaml"


@pytest.fixture(scope="module")
def warm_run(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, shared_data_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("continued") / "run"
    args = ["quickstart", "--config", str(MINI), "--model", str(tiny_model_dir), "--out", str(out),
            "--benchmarks.data_dir", str(shared_data_dir), "--real_data.eval_data", str(shared_data_dir),
            "--stop-after", "sft"]
    assert main(args) == 0
    return out


def finish_grpo(run: Path, train_cpu_s: float, screen_cpu_s: float) -> None:
    """Stage files as the screen and GRPO stages leave them (only the fields the budget reads)."""
    (run / "stages" / "screen.json").write_text(json.dumps({"cpu_s": screen_cpu_s, "wall_s": 1.0}))
    (run / "stages" / "grpo.json").write_text(json.dumps({"train_cpu_s": train_cpu_s, "train_wall_s": 1.0}))


def run_script(run: Path, monkeypatch: pytest.MonkeyPatch, *argv: str):  # noqa: ANN201
    module = bench_module("continued_sft")
    monkeypatch.setattr(sys, "argv", ["continued_sft.py", str(run), *argv])
    return module


def test_the_first_mark_at_or_past_the_budget_is_the_rival() -> None:
    pick = bench_module("continued_sft").pick
    marks = [{"t": 10.0, "step": 1}, {"t": 20.0, "step": 2}, {"t": 30.0, "step": 3}]
    assert pick(marks, 15.0)["step"] == 2
    assert pick(marks, 20.0)["step"] == 2
    assert pick(marks, 31.0) is None


def test_a_budget_known_before_it_is_spent_stops_the_training_there(
    warm_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(warm_run, run, symlinks=True)
    finish_grpo(run, train_cpu_s=0.01, screen_cpu_s=0.01)
    module = run_script(run, monkeypatch)
    module.main()
    res = json.loads((run / "stages" / "sft_continued.json").read_text())
    assert res["budget_s"] == pytest.approx(0.02) and res["screen_s"] == pytest.approx(0.01)
    assert res["steps"] == 1 and res["train_s"] >= res["budget_s"] and res["beside_grpo"]["marks_saved"] == 0
    point = res["curve"][-1]
    warm_step = json.loads((run / "stages" / "sft.json").read_text())["chosen_step"]
    assert point["step"] == warm_step + res["steps"]
    assert point["n"] > 0 and 0.0 <= point["accuracy"] <= 1.0
    assert (run / "models" / "sft_continued" / "config.json").is_file()
    assert not (run / "sft_continued_marks").exists()


def test_a_budget_known_late_takes_the_saved_mark_and_the_stage_is_then_skipped(
    warm_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(warm_run, run, symlinks=True)
    module = run_script(run, monkeypatch, "--first-mark", "0", "--mark-every", "0.000001")
    calls = []
    known = module.grpo_budget

    def late(p):  # noqa: ANN001, ANN202  (GRPO finishes after the third step, its budget long spent)
        calls.append(1)
        if len(calls) == 3:
            finish_grpo(run, train_cpu_s=0.0, screen_cpu_s=0.0)
        return known(p)

    monkeypatch.setattr(module, "grpo_budget", late)
    module.main()
    res = json.loads((run / "stages" / "sft_continued.json").read_text())
    assert res["beside_grpo"]["marks_saved"] == 2 and res["beside_grpo"]["steps_trained"] == 3
    assert res["steps"] == 1 and res["budget_s"] == 0.0 and res["over_budget_s"] >= 0.0
    assert (run / "models" / "sft_continued" / "config.json").is_file()
    assert not (run / "sft_continued_marks").exists()
    # the run's own stage now counts as finished: bench/eval_checkpoint.py scores this checkpoint
    module.main()
    assert json.loads((run / "stages" / "sft_continued.json").read_text()) == res


def test_no_warm_start_is_refused_naming_the_folder(tmp_path: Path, warm_run: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    shutil.copytree(warm_run, run, symlinks=True, ignore=shutil.ignore_patterns("models"))
    with pytest.raises(SystemExit, match="no warm start in"):
        run_script(run, monkeypatch).main()


def test_a_given_budget_needs_no_grpo_stage(warm_run: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    shutil.copytree(warm_run, run, symlinks=True)
    run_script(run, monkeypatch, "--budget-s", "0.001").main()
    res = json.loads((run / "stages" / "sft_continued.json").read_text())
    assert res["budget_s"] == 0.001 and res["budget_from"] == "--budget-s" and res["steps"] == 1
    assert not (run / "stages" / "grpo.json").exists()
    monkeypatch.setattr(sys, "argv", ["continued_sft.py", str(run), "--budget-s", "0"])
    with pytest.raises(SystemExit, match="must be positive"):
        bench_module("continued_sft").main()
