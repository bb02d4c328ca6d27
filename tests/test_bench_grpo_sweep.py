"""bench/grpo_sweep.py: arms branched from one warm start (synthetic mini quickstart), read back on a
rerun, refused when they set what the shared warm start read, and tabled with their status."""

from __future__ import annotations

import json
import math
import operator
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import bench_module

from tooltune.experiment.config import load_config
from tooltune.experiment.pipeline import Pipeline

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "configs" / "quickstart_mini.yaml"
SCRIPT = REPO / "bench" / "grpo_sweep.py"


def _sweep():
    return bench_module("grpo_sweep")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "source"
    Pipeline(out, load_config(MINI, {"threads": 1}), say=lambda s: None).run(stop_after="sft")
    return out


def _arms(tmp_path: Path, arms: dict) -> Path:
    path = tmp_path / "arms.yaml"
    path.write_text(json.dumps({"steps": 2, "arms": arms}))  # JSON is YAML
    return path


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO,
                          timeout=600)


def test_arms_run_from_one_warm_start_and_a_rerun_reads_them_back(source: Path, tmp_path: Path) -> None:
    arms = _arms(tmp_path, {"fast": {"train.grpo.learning_rate": 1e-2},
                            "fine": {"train.reward.components": {"fine_grained": 1.0, "binary": 0.0}}})
    out = tmp_path / "sweep"
    done = _run("--source", str(source), "--out", str(out), "--arms", str(arms), "--threads", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((out / "sweep.json").read_text())
    assert [r["arm"] for r in rows] == ["fast", "fine"]
    warm = json.loads((source / "stages" / "sft.json").read_text())
    for r in rows:
        assert r["steps"] == 2 and r["status"] == "ok" and r["val_n"] > 0
        # every arm starts from the source's warm start: the same validation before GRPO
        assert r["val_start"] == rows[0]["val_start"]
        assert 0 <= r["groups_with_signal"] <= 1 and r["train_cpu_s"] > 0
        # the cost columns: the update's and rollouts' seconds and the stage's peak memory
        assert r["update_s"] > 0 and r["rollout_s"] > 0 and r["peak_rss_mb"] > 0
        branch = json.loads((out / r["arm"] / "branch.json").read_text())
        assert branch["source"] == str(source.resolve()) and "sft" in branch["stages"]
    fast = json.loads((out / "fast" / "run.json").read_text())["config"]["train"]["grpo"]
    assert fast["learning_rate"] == 1e-2 and fast["max_steps"] == 2
    assert warm["chosen_step"] >= 1
    md = (out / "sweep.md").read_text()
    assert "| fast | grpo.learning_rate=0.01 | 2 |" in md and (out / "sweep.png").stat().st_size > 0
    # a rerun trains nothing: every arm's GRPO stage is read back
    before = (out / "fast" / "stages" / "grpo.json").stat().st_mtime_ns
    again = _run("--source", str(source), "--out", str(out), "--arms", str(arms), "--threads", "1")
    assert again.returncode == 0 and "done in" not in again.stdout
    assert (out / "fast" / "stages" / "grpo.json").stat().st_mtime_ns == before


def test_an_arm_setting_what_the_warm_start_read_is_refused(source: Path, tmp_path: Path) -> None:
    arms = _arms(tmp_path, {"bad": {"train.sft.learning_rate": 1e-3}})
    done = _run("--source", str(source), "--out", str(tmp_path / "s"), "--arms", str(arms))
    assert done.returncode == 2 and "arm 'bad' sets train.sft.learning_rate" in done.stderr
    assert not (tmp_path / "s").exists()
    one = _arms(tmp_path, {"a": {}})
    done = _run("--source", str(source), "--out", str(tmp_path / "s"), "--arms", str(one), "--only", "b")
    assert done.returncode == 2 and "--only: b not in" in done.stderr
    done = _run("--source", str(source), "--out", str(tmp_path / "s"), "--arms", str(one), "--steps", "-1")
    assert done.returncode == 2 and "--steps must be a positive number" in done.stderr


def test_steps_on_the_command_line_replace_the_sweep_files(source: Path, tmp_path: Path) -> None:
    one = _arms(tmp_path, {"a": {}})  # the file says 2 steps
    done = _run("--source", str(source), "--out", str(tmp_path / "s"), "--arms", str(one), "--steps", "5",
                "--report")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "s" / "sweep.md").read_text().startswith("GRPO arms of 5 steps")
    assert _sweep().arm_config(MINI, 5, {}).train.grpo.max_steps == 5


def test_a_diverged_arm_shows_why_instead_of_a_rank() -> None:
    sweep = _sweep()
    res = {"steps": 5, "stopped_early": "diverged: the loss is nan at step 5", "train_cpu_s": 12.0,
           "curve": [{"step": 0, "accuracy": 0.25, "n": 16}, {"step": 5, "accuracy": 0.0, "n": 16}],
           "log": [{"step": i, "reward": 0.1, "frac_reward_zero_std": 0.5} for i in range(1, 6)]}
    row = sweep.arm_row("x", {"train.grpo.learning_rate": 1.0}, res)
    assert row["status"].startswith("diverged") and row["groups_with_signal"] == 0.5
    assert math.isclose(row["val_end_se"], 0.0) and row["val_start"] == 0.25
    assert "diverged: the loss is nan at step 5" in sweep.table([row], 5)
    assert "| 12 | – / – | – | – | diverged" in sweep.table([row], 5)  # costs not recorded read as unknown
    assert "| 25.0 → 0.0 ± 0.0 | – → –; – → – |" in sweep.table([row], 5)  # one kind of row: no parts


def test_the_table_shows_validation_on_the_call_and_no_call_rows_apart() -> None:
    sweep = _sweep()
    res = {"steps": 8, "train_cpu_s": 1.0, "log": [],
           "curve": [{"step": 0, "accuracy": 0.15625, "n": 32, "call": 0.125, "no_call": 0.375},
                     {"step": 8, "accuracy": 0.125, "n": 32, "call": 0.0, "no_call": 1.0}]}
    row = sweep.arm_row("collapse", {}, res)
    assert row["val_call"] == (0.125, 0.0) and row["val_no_call"] == (0.375, 1.0)
    assert "| 15.6 → 12.5 ± 5.8 | 12.5 → 0.0; 37.5 → 100.0 |" in sweep.table([row], 8)


def test_an_arm_that_screened_its_prompts_shows_how_many_it_kept_and_what_the_screen_cost() -> None:
    sweep = _sweep()
    screen = {"enabled": True, "in": 319, "kept": 41, "all_right": 12, "all_wrong": 266, "cpu_s": 2400.4,
              "wall_s": 1300.0, "k": 4}
    res = {"steps": 2, "train_cpu_s": 300.0, "curve": [], "log": [], "screen": screen}
    row = sweep.arm_row("screened", {"screen.enabled": True}, res)
    kept = ("in", "kept", "all_right", "all_wrong", "cpu_s", "wall_s")
    assert row["screen"] == {k: screen[k] for k in kept}
    assert "| 41 of 319, 2400 | ok |" in sweep.table([row], 2)
    off = sweep.arm_row("plain", {}, {**res, "screen": {"enabled": False, "in": 319, "kept": 319}})
    assert off["screen"] is None and "| – | ok |" in sweep.table([off], 2)


def test_the_speedup_is_the_time_to_reach_the_base_arms_final_validation() -> None:
    sweep = _sweep()

    def arm(points: list[tuple[int, float, float]]) -> dict:  # (step, cpu s, accuracy)
        return {"curve": [{"step": st, "train_s": cpu / 2, "accuracy": acc} for st, cpu, acc in points],
                "log": [{"step": st, "train_cpu_s": cpu} for st, cpu, _ in points if st]}

    base = arm([(0, 0, 0.25), (4, 400, 0.25), (8, 800, 0.5)])
    fast = arm([(0, 0, 0.25), (4, 200, 0.5), (8, 400, 0.5)])
    sp = sweep.speedup(base, fast)
    assert sp["reached"] and sp["cpu_s"] == 200 and sp["base_cpu_s"] == 800 and sp["cpu_speedup"] == 4.0
    assert sp["wall_speedup"] == 4.0
    assert sweep.speedup(base, arm([(0, 0, 0.25), (8, 100, 0.375)])) == {"target": 0.5, "reached": False}
    flat = arm([(0, 0, 0.25), (8, 800, 0.25)])  # the base did not improve: nothing to reach
    assert sweep.speedup(flat, fast) == {"target": 0.25, "reached": None, "base_start": 0.25}


def test_an_arm_reuses_the_screen_answers_of_an_arm_with_equal_screen_settings(tmp_path: Path) -> None:
    seed_screen = _sweep().seed_screen
    settings = {"k": 4, "temperature": 0.7, "prompt": {"template": "tool_n1"}}
    done = tmp_path / "done"
    (done / "stages").mkdir(parents=True)
    (done / "screen").mkdir()
    (done / "stages" / "screen.json").write_text(json.dumps({"enabled": True, "settings": settings}))
    (done / "screen" / "rewards.jsonl").write_text('{"sample_id": "a", "rewards": [1.0], "cpu_s": 2.0}\n')
    other = {**settings, "temperature": 1.0}
    assert seed_screen(tmp_path / "hot", other) is None and not (tmp_path / "hot" / "screen").exists()
    assert seed_screen(tmp_path / "same", settings) == done
    copied = tmp_path / "same" / "screen" / "rewards.jsonl"
    assert copied.read_text() == (done / "screen" / "rewards.jsonl").read_text()
    copied.write_text("")  # an arm's own answers (a resumed screen) are never replaced
    assert seed_screen(tmp_path / "same", settings) is None and copied.read_text() == ""


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_sweep_file_loads_onto_the_real_preset(path: Path) -> None:
    # a misspelt key or a bad value would otherwise surface only when its arm starts, hours into a sweep
    sweep = _sweep()
    steps, arms = sweep.read_arms(path)
    for name, settings in arms.items():
        cfg = sweep.arm_config(REPO / "configs" / "quickstart_real_smollm2.yaml", steps, settings)
        assert cfg.train.grpo.max_steps == steps, name
        for key, value in settings.items():
            assert operator.attrgetter(key)(cfg) == value, f"{path.name}: {name}: {key}"
