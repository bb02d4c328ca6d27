"""Quickstart: settings from one file, statistics, the efficiency bench's pieces, the staged pipeline."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from tooltune.config import ConfigError, UnknownName
from tooltune.quickstart import stats
from tooltune.quickstart.config import DEFAULT_CONFIG, load_config
from tooltune.rundir import RunMismatch

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "configs" / "quickstart_mini.yaml"


def test_the_config_file_holds_the_measured_settings() -> None:
    assert DEFAULT_CONFIG == REPO / "configs" / "quickstart.yaml"
    c = load_config()
    assert (c.seed, c.threads, c.model_size, c.clock) == (0, 2, "quickstart", "cpu")
    t = c.task
    assert (t.n_train, t.n_val, t.n_heldout, t.n_unseen) == (6000, 200, 1000, 300)
    assert (t.enum_noise, t.parallel_drop, t.multi_step) == (0.7, 0.6, False)
    w = c.warm_start
    assert (w.min_steps, w.eval_every, w.eval_samples, w.threshold) == (500, 100, 100, 0.4)
    assert (c.evaluation.pass_k, c.evaluation.pass_samples) == (8, 200)
    s, g, d = c.train.sft, c.train.grpo, c.train.diagnostics
    assert (s.engine, s.target, s.batch_size, s.learning_rate, s.max_steps) == (
        "torch", "meta.sft_answer", 16, 2e-3, 2000
    )
    assert round(s.max_steps * s.warmup_ratio) == 20 and s.lr_scheduler == "constant_with_warmup"
    assert (g.max_steps, g.prompts_per_step, g.num_generations, g.learning_rate) == (120, 8, 8, 5e-4)
    assert (g.temperature, g.top_k, g.beta, g.max_completion_length) == (1.0, 0, 0.0, 72)
    assert (d.eval_every, d.eval_samples, d.eval_max_new_tokens, d.eval_batch_size) == (20, 200, 72, 64)
    assert c.train.data.template == "tool_n1_compact" and c.train.reward.components == {"binary": 1.0}


def test_mini_extends_the_measured_file_and_overrides_use_dotted_keys() -> None:
    full, mini = load_config(), load_config(MINI, {"train.grpo.learning_rate": "1e-4", "seed": 3})
    assert mini.model_size == "test" and mini.train.grpo.max_steps == 2
    assert mini.train.sft.learning_rate == full.train.sft.learning_rate  # not restated: inherited
    assert mini.train.grpo.learning_rate == 1e-4 and mini.seed == 3
    with pytest.raises(ConfigError, match="train.grpo.learnin_rate: unknown key"):
        load_config(MINI, {"train.grpo.learnin_rate": 1})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("train.run.seed", 5, "train.run.seed: set by the top-level seed"),
        ("task.seed", 5, "task.seed: set by the top-level seed"),
        ("train.data.train", "x.jsonl", "train.data.train: set by the run folder"),
        ("task.multi_step", True, "train.reward.require_format: the multi-step task"),
        ("model_size", "huge", "model_size: 'huge' is not allowed"),
    ],
)
def test_settings_the_run_cannot_take_are_refused_by_name(key: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(MINI, {key: value})
    ok = load_config(MINI, {"task.multi_step": True, "train.reward.require_format": False})
    assert ok.task.multi_step


def test_binomial_and_paired_statistics_match_hand_computation() -> None:
    b = stats.binomial([1, 0, 1, 1])
    assert b["accuracy"] == 0.75 and math.isclose(b["se"], math.sqrt(0.75 * 0.25 / 4))
    d = stats.paired([1, 1, 1, 0], [0, 1, 0, 0])  # differences 1, 0, 1, 0: mean 0.5, sd 0.57735
    assert d["diff"] == 0.5
    assert math.isclose(d["se"], math.sqrt((4 * 0.25) / 3 / 4))
    assert math.isclose(d["z"], 0.5 / d["se"])


def test_cli_flags_come_from_the_config_and_bench_is_registered() -> None:
    from tooltune import bench_commands
    from tooltune.config import given_overrides
    from tooltune.quickstart import commands

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    commands.register(sub)
    bench_commands.register(sub)
    args = parser.parse_args(
        ["quickstart", "--out", "x", "--seed", "2", "--train.grpo.learning_rate", "1e-4", "--config", "c"]
    )
    assert args.config == "c" and callable(args.func)
    assert given_overrides(args) == {"seed": "2", "train.grpo.learning_rate": "1e-4"}
    with pytest.raises(SystemExit):  # derived keys have no flag
        parser.parse_args(["quickstart", "--train.run.seed", "1"])
    args = parser.parse_args(["bench", "efficiency", "--out", "y"])
    assert args.name == "efficiency" and args.args == ["--out", "y"]
    assert "efficiency" in bench_commands.available(REPO / "bench")


def _bench_efficiency():
    import importlib.util

    path = REPO / "bench" / "efficiency.py"
    spec = importlib.util.spec_from_file_location("bench_efficiency", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_efficiency_variants_get_only_their_techniques_and_the_lr_scale() -> None:
    from tooltune.config import set_key

    mod = _bench_efficiency()
    args = argparse.Namespace(
        filter_k=2, filter_reset=True, downsample_m=4, advantage="full", lr_scale=0.5, vanilla_lr_scale=1.0
    )
    assert mod.variant_knobs("vanilla", args, 1e-3) == {
        "filter.enabled": False,
        "filter.k": 2,
        "filter.reset_after_skip": True,
        "downsample.enabled": False,
        "downsample.m": 4,
        "downsample.advantage": "full",
        "grpo.learning_rate": 1e-3,
    }
    both = mod.variant_knobs("filter+downsample", args, 1e-3)
    assert (both["filter.enabled"], both["downsample.enabled"]) == (True, True)
    assert both["grpo.learning_rate"] == 5e-4
    assert not mod.variant_knobs("filter_only", args, 1e-3)["downsample.enabled"]
    assert not mod.variant_knobs("downsample_only", args, 1e-3)["filter.enabled"]
    args.vanilla_lr_scale = 0.5  # the lr control: vanilla at (b)'s learning rate
    assert mod.variant_knobs("vanilla", args, 1e-3)["grpo.learning_rate"] == 5e-4
    cfg = load_config(MINI).train  # the knobs are keys of the training config
    for key, value in both.items():
        set_key(cfg, key, value)
    assert cfg.filter.enabled and cfg.downsample.m == 4 and cfg.validate()


def test_efficiency_speedup_is_time_to_vanillas_best_over_time_to_match_it() -> None:
    mod = _bench_efficiency()
    a = [
        {"train_s": 0, "accuracy": 0.3},
        {"train_s": 100, "accuracy": 0.4},
        {"train_s": 200, "accuracy": 0.5},
    ]
    b = [{"train_s": 0, "accuracy": 0.3}, {"train_s": 80, "accuracy": 0.5}, {"train_s": 160, "accuracy": 0.6}]
    assert mod.speedup(a, b) == {"target_accuracy": 0.5, "time_a_s": 200, "time_b_s": 80, "speedup": 2.5}
    assert mod.speedup(a, a[:2])["speedup"] is None  # (b) never reached (a)'s best
    flat = [{"train_s": 0, "accuracy": 0.5}, {"train_s": 50, "accuracy": 0.4}]
    assert mod.speedup(flat, b)["speedup"] is None  # (a) never improved: no ratio


def test_efficiency_reference_is_refused_unless_measured_the_same_way(tmp_path: Path) -> None:
    mod = _bench_efficiency()
    expect = {"task": "single_turn", "seed": 1, "eval_samples": 1000, "eval_every": 10}
    ref = tmp_path / "efficiency.json"
    vanilla = {"curve": [{"train_s": 0, "accuracy": 0.5}]}
    ref.write_text(json.dumps({**expect, "variants": {"vanilla": vanilla}}))
    assert mod.reference_vanilla(str(ref), expect)["curve"][0]["accuracy"] == 0.5
    with pytest.raises(ValueError, match="eval_samples is 1000, this run has 300"):
        mod.reference_vanilla(str(ref), {**expect, "eval_samples": 300})
    with pytest.raises(ValueError, match="no readable vanilla run"):
        mod.reference_vanilla(str(tmp_path / "missing.json"), expect)


def test_mini_pipeline_resumes_reports_and_writes_a_reproducible_training_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooltune.quickstart.run import STAGES, Pipeline
    from tooltune.training.config import load_config as load_train_config
    from tooltune.training.sft import SFTLoop

    phases: dict[str, dict] = {}
    train = SFTLoop.train

    def recorded(loop, *args, **kw):
        phases[kw.get("progress")] = kw
        return train(loop, *args, **kw)

    monkeypatch.setattr(SFTLoop, "train", recorded)
    cfg = load_config(MINI, {"threads": 1})
    said: list[str] = []
    Pipeline(tmp_path, cfg, say=said.append).run(stop_after="eval_sft")
    partial = json.loads((tmp_path / "report.json").read_text())
    assert "sft_accuracy" in partial and "grpo_accuracy" not in partial
    said.clear()
    report = Pipeline(tmp_path, cfg, say=said.append).run()
    skipped = [line for line in said if "already finished" in line]
    assert len(skipped) == STAGES.index("eval_sft") + 1  # nothing finished was redone
    for key in (
        "sft_accuracy",
        "grpo_accuracy",
        "sft_continued_accuracy",
        "sft_pass_at_8",
        "sft_se",
        "grpo_vs_sft",
        "grpo_vs_sft_continued",
        "timings",
        "seed",
        "environment",
    ):
        assert key in report, key
    per_cat = report["grpo_eval"]["heldout"]["per_category"]
    assert sum(v["n"] for v in per_cat.values()) == cfg.task.n_heldout
    assert report["grpo"]["steps"] == cfg.train.grpo.max_steps
    # equal compute: continued SFT got GRPO's training CPU time, evaluated at GRPO's curve times
    assert report["clock"]["name"] == "cpu" and "process_time" in report["clock"]["counts"]
    assert report["sft_continued"]["budget_s"] == report["grpo"]["train_cpu_s"] > 0
    assert report["sft_continued"]["train_s"] >= report["sft_continued"]["budget_s"]
    continued = phases["continued SFT"]  # bounded by the budget, not by a step count
    assert "steps" not in continued and continued["budget"].budget == report["sft_continued"]["budget_s"]
    cont = json.loads((tmp_path / "stages" / "sft_continued.json").read_text())
    assert cont["clock"] == "cpu" and cont["curve"][0]["t"] == 0.0 and len(cont["curve"]) >= 2
    assert [p["t"] for p in cont["curve"]] == sorted(p["t"] for p in cont["curve"])
    assert "Equal compute: continued SFT got GRPO's training time on the cpu clock" in (
        tmp_path / "report.md").read_text()
    for key in ("grpo_vs_sft_unseen_tools", "sft_continued_vs_sft_unseen_tools",
                "grpo_vs_sft_continued_unseen_tools"):
        assert set(report[key]) == {"diff", "se", "z"}, key
    grpo = json.loads((tmp_path / "stages" / "grpo.json").read_text())
    assert [p["step"] for p in grpo["curve"]] == [0, 1, 2]  # validation curve every step (mini)
    assert all(r["train_s"] <= grpo["train_wall_s"] for r in grpo["log"])
    sft = json.loads((tmp_path / "stages" / "sft.json").read_text())
    assert [p["step"] for p in sft["curve"]] == [3, 6] and sft["chosen_step"] in (3, 6)
    assert (tmp_path / "report.md").read_text().startswith("# tooltune quickstart report")
    assert report["plots"] == ["reward.png", "accuracy.png", "zero_variance.png", "time_split.png"]
    for png in report["plots"]:
        assert (tmp_path / png).stat().st_size > 0
    # one definition of the training reward: the report, the stage's headline and `tooltune report`
    from tooltune.training.report import summarize as run_summary

    again = run_summary(tmp_path / "grpo")
    assert (report["grpo"]["reward_first"], report["grpo"]["reward_last"]) == (again["reward_first"],
                                                                                again["reward_last"])
    assert f"(mean of the first / last {again['reward_window']} steps)" in " ".join(said)
    assert [p.get("n") for p in grpo["curve"]] == [cfg.task.n_val] * 3  # each point's sample count
    # DIR/train.yaml: `tooltune train` runs SFT to the chosen warm start, then GRPO, from the base model
    train = load_train_config(tmp_path / "train.yaml")
    assert train.sft.enabled and train.grpo.enabled and train.sft.max_steps == sft["chosen_step"]
    assert train.model.name_or_path == str(tmp_path / "models" / "base")
    assert train.data.train == str(tmp_path / "data" / "train.jsonl") and train.run.seed == cfg.seed
    # the folder's config reads back as the same settings, and another one is refused
    assert load_config(tmp_path / "config.yaml").to_dict() == cfg.to_dict()
    with pytest.raises(RunMismatch, match="holds another run .*max_steps"):
        Pipeline(tmp_path, load_config(MINI, {"threads": 1, "train.grpo.max_steps": 5}))


class Killed(Exception):
    pass


def test_sft_stage_resumes_from_its_progress_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed inside SFT continues from the last check and chooses the same warm start."""
    from tooltune.quickstart import run as qs

    cfg = load_config(MINI, {"threads": 1, "train.sft.max_steps": 9})
    whole = qs.Pipeline(tmp_path / "whole", cfg, say=lambda s: None)
    whole.run(stop_after="sft")
    killed = qs.Pipeline(tmp_path / "killed", cfg, say=lambda s: None)
    killed.run(stop_after="model")
    original = qs.SFTLoop.train

    def killed_after_first_check(loop, *a, **kw):  # the progress checkpoint at step 3, then a kill
        def once(lp):
            kw["callback"](lp)
            raise Killed

        return original(loop, *a, **{**kw, "callback": once})

    monkeypatch.setattr(qs.SFTLoop, "train", killed_after_first_check)
    with pytest.raises(Killed):
        killed.run(stop_after="sft")
    monkeypatch.undo()
    assert (tmp_path / "killed" / "models" / "sft_progress" / "sft_state.pt").is_file()
    said: list[str] = []
    qs.Pipeline(tmp_path / "killed", cfg, say=said.append).run(stop_after="sft")
    assert any("resuming SFT at step 3" in line for line in said)
    a, b = whole.result("sft"), killed.result("sft")
    assert [p["step"] for p in a["curve"]] == [p["step"] for p in b["curve"]] == [3, 6, 9]
    assert [p["loss"] for p in a["curve"]] == [p["loss"] for p in b["curve"]]
    assert a["chosen_step"] == b["chosen_step"]


def test_efficiency_mini_is_a_seconds_long_smoke_test() -> None:
    mod = _bench_efficiency()
    assert mod.parse_args(["--mini"]).budget_s == 5.0
    assert mod.parse_args([]).budget_s == 240.0
    assert mod.parse_args(["--mini", "--budget-s", "30"]).budget_s == 30.0
    with pytest.raises(SystemExit):
        mod.parse_args(["--budget-s", "0"])


def test_one_process_writes_a_quickstart_folder(tmp_path) -> None:
    from test_rundir import lock_holder

    from tooltune.quickstart.run import Pipeline
    from tooltune.rundir import RunFolderBusy

    with lock_holder(tmp_path / "q"), pytest.raises(RunFolderBusy, match="in use by another run"):
        Pipeline(tmp_path / "q", load_config(MINI, {"threads": 1}))


def test_the_accuracy_figure_shows_validation_with_standard_errors_on_labelled_full_axes() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tooltune.quickstart.report import accuracy_figure

    cfg = load_config(DEFAULT_CONFIG).to_dict()  # SFT checks 100 validation samples, GRPO's curve 200
    results = {
        "data": {"sizes": {"val": 200}},
        "sft": {"chosen_step": 600, "curve": [{"step": 500, "val_accuracy": 0.3},
                                              {"step": 600, "val_accuracy": 0.46}]},
        "grpo": {"curve": [{"step": 0, "accuracy": 0.445}, {"step": 20, "accuracy": 0.535}],
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
    finally:
        plt.close(fig)


def test_a_busy_machine_is_named_at_start_with_what_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooltune.cli import main
    from tooltune.quickstart import commands

    note = commands.busy_machine_note(2, resuming=False, load=2.7, cores=2)
    assert note == ('the machine is busy (load 2.7 on 2 cores, about 0 free): 2 torch threads will run '
                    'several times slower than the measured times; pass --threads 1 '
                    '(make demo ARGS="--threads 1")')
    assert commands.busy_machine_note(2, resuming=False, load=0.2, cores=2) is None  # quiet
    assert commands.busy_machine_note(2, resuming=False, load=1.2, cores=4) is None  # enough free cores
    # one thread already, or a run resuming with the threads it started with: only the warning
    for threads, resuming in ((1, False), (2, True)):
        said = commands.busy_machine_note(threads, resuming=resuming, load=3.0, cores=2)
        assert said is not None and said.endswith("expect it to run slower than the measured times")
    monkeypatch.setattr(commands.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    monkeypatch.setattr(commands, "available_cores", lambda: 2)
    assert main(["quickstart", "--config", str(MINI), "--out", str(tmp_path / "q"), "--threads", "2",
                 "--stop-after", "data"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == ("tooltune quickstart: the machine is busy (load 3.0 on 2 cores, about 0 free): 2 torch "
                      'threads will run several times slower than the measured times; pass --threads 1 '
                      '(make demo ARGS="--threads 1")')


def test_make_demo_passes_its_args_to_the_quickstart() -> None:
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "demo", "ARGS=--seed 1 --threads 1", "DEMO_OUT=runs/qs1"], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=True)
    # (-n also lists the installation when the requirement files changed since the last one)
    assert [line for line in dry.stdout.splitlines() if "tooltune quickstart" in line][-1].endswith(
        "tooltune quickstart --out runs/qs1 --seed 1 --threads 1")


def test_the_budget_watch_stops_on_the_clock_and_leaves_evaluations_out(monkeypatch) -> None:
    from tooltune.quickstart import compute

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
    from tooltune.quickstart.compute import grpo_curve

    summary = {"curve": [{"step": 0, "train_s": 0.01, "accuracy": 0.4},
                         {"step": 20, "train_s": 40.0, "accuracy": 0.5}],
               "log": [{"step": 20, "train_cpu_s": 30.0}]}
    assert [p["t"] for p in grpo_curve(summary, "wall")] == [0.01, 40.0]
    assert [p["t"] for p in grpo_curve(summary, "cpu")] == [0.0, 30.0]


def test_a_stopped_grpo_stage_says_why_in_its_stage_line() -> None:
    from tooltune.quickstart.run import headline

    res = {"steps": 6, "reward_first": 0.3, "reward_last": 0.0, "reward_window": 2}
    assert "stopped early" not in headline("grpo", {**res, "stopped_early": None})
    line = headline("grpo", {**res, "stopped_early": "diverged: the loss is nan at step 6"})
    assert line.endswith("; stopped early: diverged: the loss is nan at step 6")
