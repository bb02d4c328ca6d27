"""bench/efficiency.py: the variants' settings, the speed-up, the reference run, the mini smoke test, and
--grid: the grid's runs and the summary table read from per-seed files."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from pathlib import Path

import pytest
from conftest import bench_module

from tooltune.experiment.config import load_config

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "configs" / "quickstart_mini.yaml"


def _grid():
    return bench_module("_efficiency_grid")


def _run(times_acc: list[tuple[float, float]], rollout: float, update: float, zero: list[float]) -> dict:
    """A `grpo_summary` with only what the grid reads."""
    curve = [{"step": 10 * i, "train_s": t, "accuracy": a} for i, (t, a) in enumerate(times_acc)]
    return {
        "steps": 10 * (len(curve) - 1),
        "train_wall_s": curve[-1]["train_s"],
        "rollout_s": rollout,
        "update_s": update,
        "curve": curve,
        # CPU time: half the wall time (a run sharing its core), so CPU-time speed-ups equal wall ones
        "log": [{"step": p["step"], "train_cpu_s": p["train_s"] / 2} for p in curve[1:]]
        + [{"tooltune/zero_variance_share": z} for z in zero],
    }


def _seed_file(tmp_path: Path, seed: int, scale: float) -> Path:
    """Single-turn runs of one seed; `scale` stretches the shared-prefix-off runs' times."""
    runs = {
        "vanilla+no_sp": _run([(0.1, 0.40), (40 * scale, 0.50), (80 * scale, 0.60)], 20, 60, [0.5, 0.3]),
        "vanilla+sp": _run([(0.1, 0.40), (20, 0.55), (40, 0.60), (60, 0.62)], 30, 30, [0.4, 0.2]),
        "filter_k1+no_sp": _run([(0.1, 0.40), (50 * scale, 0.58), (90 * scale, 0.59)], 20, 70, [0.2]),
        "filter_k1+sp": _run([(0.1, 0.40), (30, 0.61), (60, 0.63)], 40, 20, [0.1]),
        "filter_k2+no_sp": _run([(0.1, 0.40), (50, 0.45)], 10, 40, [0.5]),
        "filter_k2+sp": _run([(0.1, 0.40), (50, 0.62)], 25, 25, [0.5]),
    }
    path = tmp_path / f"grid_{seed}.json"
    path.write_text(json.dumps({"seed": seed, "parts": {"single_turn": {"runs": runs}}}))
    return path


def test_grid_runs_every_variant_with_the_shared_prefix_off_and_on() -> None:
    g = _grid()
    single = g.grid_runs("single_turn")
    assert [k for k, _ in single] == [
        "vanilla+no_sp", "vanilla+sp", "filter_k1+no_sp", "filter_k1+sp", "filter_k2+no_sp", "filter_k2+sp"]
    assert dict(single)["filter_k2+sp"] == {"filter.enabled": True, "filter.k": 2, "grpo.shared_prefix": True}
    assert dict(single)["vanilla+no_sp"] == {"grpo.shared_prefix": False}
    multi = dict(g.grid_runs("multi_step"))
    assert set(multi) == {"vanilla_n8+no_sp", "vanilla_n8+sp", "filter_n16_m8+no_sp", "filter_n16_m8+sp"}
    knobs = multi["filter_n16_m8+sp"]
    assert (knobs["grpo.num_generations"], knobs["downsample.m"], knobs["filter.enabled"]) == (16, 8, True)


def test_speedup_needs_an_improving_reference_and_a_run_that_gets_there() -> None:
    g = _grid()
    a = [{"train_s": 0.2, "accuracy": 0.3}, {"train_s": 100, "accuracy": 0.5}]
    b = [{"train_s": 0.1, "accuracy": 0.3}, {"train_s": 40, "accuracy": 0.5}]
    assert g.speedup(a, b)["speedup"] == 2.5
    flat = [{"train_s": 0.2, "accuracy": 0.5}, {"train_s": 100, "accuracy": 0.4}]  # best at the warm start
    assert g.speedup(flat, a) == {"target_accuracy": 0.5, "time_a_s": 0, "time_b_s": 100, "speedup": None}
    assert g.speedup(a, flat)["speedup"] == math.inf  # (b) starts at the target


def test_summary_table_per_seed_and_mean(tmp_path: Path) -> None:
    g = _grid()
    files = [str(_seed_file(tmp_path, 0, 1.0)), str(_seed_file(tmp_path, 1, 2.0))]
    summary = g.summarize(g.load_results(files))
    seed0 = summary["single_turn"]["seeds"][0]
    # vanilla+sp reaches vanilla+no_sp's best (0.60 at 80 s) at 40 s: the shared-prefix speed-up
    assert seed0["vanilla+sp"]["vs_baseline"]["speedup"] == pytest.approx(2.0)
    # against vanilla+sp (best 0.62 at 60 s), filter_k1+sp reaches 0.62 at 60 s
    assert seed0["filter_k1+sp"]["same_sp"]["speedup"] == pytest.approx(1.0)
    assert seed0["filter_k1+sp"]["vs_baseline"]["speedup"] == pytest.approx(80 / 30)
    assert seed0["filter_k1+sp"]["vs_baseline_cpu"]["speedup"] == pytest.approx(80 / 30)
    assert seed0["filter_k2+no_sp"]["same_sp"]["speedup"] is None  # never reached 0.60
    row = seed0["filter_k1+no_sp"]
    assert (row["best"], row["end"], row["steps"]) == (0.59, 0.59, 20)
    assert row["update_share"] == pytest.approx(70 / 90) and row["zero_variance"] == pytest.approx(0.2)
    assert seed0["vanilla+no_sp"]["zero_variance"] == pytest.approx(0.4)
    mean = summary["single_turn"]["mean"]["vanilla+sp"]
    # seed 1 stretches the no_sp times by 2: the shared-prefix speed-up is 160 / 40 = 4 there
    assert mean["vs_baseline"]["speedup"] == pytest.approx(3.0)
    assert (mean["vs_baseline"]["reached"], mean["vs_baseline"]["of"]) == (2, 2)
    assert mean["end"] == pytest.approx(0.62) and mean["update_s"] == 30
    k2 = summary["single_turn"]["mean"]["filter_k2+no_sp"]["same_sp"]
    assert (k2["speedup"], k2["reached"], k2["of"]) == (None, 0, 2)
    text = g.table(summary)
    assert "| 1 | vanilla+sp | 30 | 40.0 | 62.0 | 62.0 | 2.00 | 30 | 30 | 50.0% | 30.0% (–) | 0 |" in text
    assert "| vanilla+sp | 30.0 | 62.0 | 62.0 |" in text and "3.00× (2/2)" in text


def test_summarize_command_writes_the_table_and_plot(tmp_path: Path) -> None:
    mod = _bench_efficiency()
    files = [str(_seed_file(tmp_path, 0, 1.0)), str(_seed_file(tmp_path, 2, 1.5))]
    assert mod.main(["--summarize", *files, "--out", str(tmp_path / "sum")]) == 0
    assert (tmp_path / "sum" / "summary.png").stat().st_size > 0
    md = (tmp_path / "sum" / "summary.md").read_text()
    assert "| 2 | filter_k1+sp |" in md
    assert json.loads((tmp_path / "sum" / "summary.json").read_text())["files"] == files
    args = mod.parse_args(["--grid"])
    assert args.budget_s == 90.0 and args.parts == "single_turn,multi_step"
    with pytest.raises(SystemExit):
        mod.parse_args(["--grid", "--parts", "single_turn,nope"])


def _bench_efficiency():
    """bench/efficiency.py as a module (loaded from its file: it runs as a script)."""
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



def test_efficiency_mini_is_a_seconds_long_smoke_test() -> None:
    mod = _bench_efficiency()
    assert mod.parse_args(["--mini"]).budget_s == 5.0
    assert mod.parse_args([]).budget_s == 240.0
    assert mod.parse_args(["--mini", "--budget-s", "30"]).budget_s == 30.0
    with pytest.raises(SystemExit):
        mod.parse_args(["--budget-s", "0"])
