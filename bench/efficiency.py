"""Efficiency benchmark: vanilla GRPO vs GRPO + pre-rollout filtering + max-variance down-sampling.

From the same SFT warm start, data and seed (a quickstart run, stopped after its warm-start
evaluation), train each variant for the same training-time budget, evaluating greedy held-out
exact match at regular step intervals (evaluation time is kept off the training clock):

  (a) vanilla        TRL GRPO as shipped (n rollouts per prompt, all back-propagated)
  (b) filter+ds      online pre-rollout filtering (k consecutive all-correct epochs -> skip; Eq. 4-6 of
                     arXiv 2606.00135) + max-variance down-sampling to m of n rollouts (Eq. 7)
  filter only, down-sampling only (ablation; --no-ablation skips them)

speed-up = wall time for (a) to reach its best held-out accuracy / wall time for (b) to reach that
accuracy (the efficiency paper's "matched accuracy" speed-up; it reports 1.7x single-turn).
Also reported per variant: rollouts generated, tokens back-propagated, rollout vs update time.
The RL prompt set is a small subset of the training prompts so that several epochs fit the budget
(filtering only acts from the second epoch on).

Defaults are the paper's recipe (k = 1, m = 4 of 8, advantages over the kept rollouts, vanilla's lr).
Measured here (docs/BENCHMARKS.md): on 256 prompts over 5-9 epochs, k = 1 without re-admission
skips two thirds of the prompts and the policy collapses late; `--filter-reset --lr-scale 0.5` held,
but vanilla at the same half lr (`--vanilla-lr-scale 0.5`) did as well: at matched lr, no speed-up here.

`--multi-step` runs the multi-step variant instead (tool results in the history, native template
with reasoning history, tool-call correctness only: no format term).

`--grid` runs the comparison in the efficiency paper's regime (`bench/_efficiency_grid.py`): prompts
of hundreds of tokens of tool documentation (configs/quickstart_efficiency_paper.yaml and its multi-step
counterpart), single-turn vanilla vs filtering k = 1, 2 and multi-step vanilla n = 8 vs filtering +
n = 16 down-sampled to m = 8, each with the shared-prefix update on and off, all at the preset's
(vanilla's) learning rate.
One command per seed (`--parts` splits it); `--summarize FILE...` reads the per-seed files into one table.

Run: python bench/efficiency.py [--out DIR] [--budget-s 300] [--seed 0] [--multi-step]
     python bench/efficiency.py --grid --seed 0 --out DIR [--warm-start DIR --warm-start-multi DIR]
     python bench/efficiency.py --summarize DIR0/grid_*.json DIR1/grid_*.json ... --out DIR
     (or `tooltune bench efficiency ...`)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._efficiency_grid import (  # noqa: E402  (after the path set-up above)
    GRID,
    grid_runs,
    load_results,
    plot,
    plot_grid,
    speedup,
    summarize,
    table,
    time_to_reach,
)

__all__ = ["speedup", "time_to_reach"]  # `speedup()` is the bench's definition of speed-up
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
GRID_CONFIGS = {
    "single_turn": "quickstart_efficiency_paper.yaml",
    "multi_step": "quickstart_efficiency_paper_multi_step.yaml",
}

# which techniques each variant switches on (their parameters: --filter-k, --downsample-m)
VARIANTS = {
    "vanilla": {"filter": False, "downsample": False},
    "filter+downsample": {"filter": True, "downsample": True},
    "filter_only": {"filter": True, "downsample": False},
    "downsample_only": {"filter": False, "downsample": True},
}


def variant_knobs(name: str, args: argparse.Namespace, base_lr: float) -> dict[str, Any]:
    """Training-config overrides of one variant: its techniques, with the command-line parameters."""
    on = VARIANTS[name]
    return {
        "filter.enabled": on["filter"],
        "filter.k": args.filter_k,
        "filter.reset_after_skip": args.filter_reset,
        "downsample.enabled": on["downsample"],
        "downsample.m": args.downsample_m,
        "downsample.advantage": args.advantage,
        "grpo.learning_rate": base_lr * (args.vanilla_lr_scale if name == "vanilla" else args.lr_scale),
    }


def reference_vanilla(path: str, expect: dict[str, Any]) -> dict[str, Any]:
    """Run (a) from an earlier efficiency.json, refused unless it was measured the way this run is."""
    try:
        ref = json.loads(Path(path).read_text())
        vanilla = ref["variants"]["vanilla"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"--reference {path}: no readable vanilla run ({type(e).__name__}: {e})") from e
    for key, want in expect.items():
        if ref.get(key) != want:
            raise ValueError(f"--reference {path}: {key} is {ref.get(key)!r}, this run has {want!r}")
    return vanilla


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The bench's options; --mini shrinks sizes and the default budget to a smoke test."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/bench_efficiency", help="output folder (efficiency.json, PNG)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="training time per variant on --clock, held-out evaluations excluded (default 240; --grid 90; "
        "--mini 5)",
    )
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="clock of --budget-s: cpu = the process's CPU time (equal compute whatever else runs on the "
        "machine), wall = elapsed time",
    )
    ap.add_argument("--eval-every", type=int, default=10, help="held-out evaluation every N steps")
    ap.add_argument("--eval-samples", type=int, default=300, help="held-out samples per evaluation")
    ap.add_argument("--rl-prompts", type=int, default=256, help="RL prompt set (several epochs must fit)")
    ap.add_argument("--no-ablation", action="store_true", help="run only (a) and (b)")
    ap.add_argument("--reference", default="", help="efficiency.json whose vanilla run (a) is reused")
    ap.add_argument("--variants", default="", help=f"comma-separated subset of {', '.join(VARIANTS)}")
    ap.add_argument("--multi-step", action="store_true", help="the multi-step variant")
    ap.add_argument("--filter-k", type=int, default=1, help="filter: skip after k all-correct epochs")
    ap.add_argument(
        "--filter-reset",
        action="store_true",
        help="a skipped prompt returns one epoch later (PromptFilter.reset_after_skip) instead of for good",
    )
    ap.add_argument("--downsample-m", type=int, default=4, help="down-sampling: rollouts kept of n")
    ap.add_argument(
        "--advantage",
        choices=("kept", "full"),
        default="kept",
        help="advantages after down-sampling: over the m kept rollouts or the n generated",
    )
    ap.add_argument(
        "--lr-scale",
        type=float,
        default=1.0,
        help="learning-rate multiplier for the variants other than vanilla (vanilla keeps the quickstart's; "
        "--grid: for every run)",
    )
    ap.add_argument(
        "--vanilla-lr-scale",
        type=float,
        default=1.0,
        help="learning-rate multiplier for vanilla (the control for --lr-scale: same lr, techniques off)",
    )
    ap.add_argument("--mini", action="store_true", help="smoke-test sizes (seconds, not a measurement)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: robust on a shared machine)")
    ap.add_argument(
        "--warm-start",
        default="",
        help="reuse this quickstart run directory (same seed and settings) for data, model and warm start",
    )
    grid = ap.add_argument_group("the grid in the paper's regime (--grid, --summarize)")
    grid.add_argument("--grid", action="store_true", help="run the grid of bench/_efficiency_grid.py")
    grid.add_argument("--parts", default=",".join(GRID), help="comma-separated parts of the grid to run")
    grid.add_argument("--runs", default="", help="comma-separated run keys to run (default: all)")
    grid.add_argument(
        "--warm-start-multi", default="", help="quickstart run directory of the multi-step warm start"
    )
    grid.add_argument(
        "--warm-seed",
        type=int,
        default=None,
        help="seed of the warm starts (task data, model, SFT; default --seed); --seed seeds the GRPO runs",
    )
    grid.add_argument(
        "--summarize", nargs="+", default=None, metavar="JSON", help="grid files to read into one table"
    )
    args = ap.parse_args(argv)
    if args.budget_s is None:
        args.budget_s = 5.0 if args.mini else (90.0 if args.grid else 240.0)
    unknown = sorted(set(args.parts.split(",")) - set(GRID))
    if unknown:
        ap.error(f"--parts: unknown {unknown}; choose from {list(GRID)}")
    if args.budget_s <= 0:
        ap.error(f"--budget-s: must be > 0, got {args.budget_s}")
    return args


def _fail(message: str) -> None:
    print(f"bench/efficiency.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def warm_start(config: Path, seed: int, threads: int, folder: Path, overrides: dict[str, Any]) -> Any:
    """The quickstart pipeline of `config` run to its warm start (stages data, model, sft, eval_sft)."""
    from tooltune.experiment.config import load_config
    from tooltune.experiment.pipeline import Pipeline

    cfg = load_config(config, {"seed": seed, "threads": threads, **overrides})
    base = Pipeline(folder, cfg, say=lambda s: print(s, flush=True))
    print(f"== warm start {folder} (quickstart stages data, model, sft, eval_sft; reused when present)")
    base.run(stop_after="eval_sft")
    return base


def train_variant(base: Any, run_dir: Path, knobs: dict[str, Any], args: argparse.Namespace) -> dict:
    """Train one variant from `base`'s warm start for the budget; its `grpo_summary`."""
    from tooltune.config import set_key
    from tooltune.training.diagnostics import grpo_summary
    from tooltune.training.runner import train

    shutil.rmtree(run_dir, ignore_errors=True)
    tcfg = base.train_config("grpo")
    for key, value in {
        **knobs,
        "run.output_dir": str(run_dir),
        "run.save_steps": 10**9,  # no checkpoints: a variant is rerun, not resumed
        "grpo.max_steps": 10**6,  # the training-time budget ends training
        "grpo.max_seconds": args.budget_s,
        "grpo.max_seconds_clock": getattr(args, "clock", "wall"),
        "data.max_train_samples": args.n_rl,
        "data.val": str(base.out / "data" / "heldout.jsonl"),
        "data.max_val_samples": args.n_eval,
        "diagnostics.eval_samples": args.n_eval,
        "diagnostics.eval_every": args.eval_every,
    }.items():
        set_key(tcfg, key, value)
    t = time.perf_counter()
    train(tcfg.validate())
    r = grpo_summary(run_dir / "metrics.jsonl")
    r["bench_wall_s"] = time.perf_counter() - t
    r["settings"] = knobs
    best = max(p["accuracy"] for p in r["curve"])
    print(
        f"   steps {r['steps']}, best held-out {best:.3f}, end {r['curve'][-1]['accuracy']:.3f}, "
        f"rollouts {r['rollouts_generated']:.0f}, tokens trained {r['tokens_trained']:.0f}, "
        f"rollout {r['rollout_s']:.0f} s / update {r['update_s']:.0f} s",
        flush=True,
    )
    return r


def run_grid(args: argparse.Namespace, out: Path) -> int:
    """One seed of the grid: per part, its warm start, then every run; one JSON file per part."""
    from tooltune.experiment.report import environment

    warm_seed = args.seed if args.warm_seed is None else args.warm_seed
    folders = {"single_turn": args.warm_start, "multi_step": args.warm_start_multi}
    for part in args.parts.split(","):
        config = CONFIGS / ("quickstart_mini.yaml" if args.mini else GRID_CONFIGS[part])
        extra = {"task.multi_step": True, "train.reward.require_format": False}
        overrides = extra if args.mini and part == "multi_step" else {}
        folder = Path(folders[part]) if folders[part] else out / f"warm_start_{part}"
        base = warm_start(config, warm_seed, args.threads, folder, overrides)
        args.n_rl = min(args.rl_prompts, len(base.splits()["train"]))
        args.n_eval = min(args.eval_samples, len(base.splits()["heldout"]))
        g = base.cfg.train.grpo
        report: dict[str, Any] = {
            "seed": args.seed,
            "warm_seed": warm_seed,
            "config": f"configs/{config.name}",
            "warm_start": str(folder),
            "warm_start_step": base.result("sft")["chosen_step"],
            "budget_s_per_variant": args.budget_s,
            "clock": args.clock,
            "rl_prompts": args.n_rl,
            "eval_samples": args.n_eval,
            "eval_every": args.eval_every,
            "learning_rate": g.learning_rate * args.lr_scale,
            "environment": environment(),
            "parts": {part: {"runs": {}}},
        }
        path = out / f"grid_{part}.json"
        for key, knobs in grid_runs(part):
            if args.runs and key not in args.runs.split(","):
                continue
            n = knobs.get("grpo.num_generations", g.num_generations)
            knobs = {
                **knobs,
                "run.seed": args.seed,
                "grpo.per_device_batch_size": g.prompts_per_step * n,
                "grpo.learning_rate": g.learning_rate * args.lr_scale,  # one lr for every run
            }
            print(f"== {part} {key}: {args.budget_s:.0f} s of training", flush=True)
            run = train_variant(base, out / "runs" / part / key, knobs, args)
            report["parts"][part]["runs"][key] = run
            path.write_text(json.dumps(report, indent=1))  # each finished run is kept
        print(f"wrote {path}")
    return summarize_files(sorted(str(p) for p in out.glob("grid_*.json")), out)


def summarize_files(paths: list[str], out: Path) -> int:
    """Read grid files into one table (printed, and written to summary.{json,md}) and a PNG."""
    results = load_results(paths)
    summary = summarize(results)
    text = table(summary)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"files": paths, "summary": summary}, indent=1))
    (out / "summary.md").write_text(text + "\n")
    plot_grid(results, out / "summary.png")
    print(f"wrote {out / 'summary.json'}, {out / 'summary.md'} and {out / 'summary.png'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    if args.summarize:
        return summarize_files(args.summarize, out)

    # deferred: torch, transformers and trl load in seconds; --help and the tests need none of them
    import torch

    from tooltune.experiment.report import environment

    torch.set_num_threads(args.threads)
    out.mkdir(parents=True, exist_ok=True)
    if args.grid:
        return run_grid(args, out)
    overrides: dict[str, Any] = {}
    if args.multi_step:
        overrides.update({"task.multi_step": True, "train.reward.require_format": False})
    config = CONFIGS / ("quickstart_mini.yaml" if args.mini else "quickstart.yaml")
    warm_dir = Path(args.warm_start) if args.warm_start else out / "warm_start"
    base = warm_start(config, args.seed, args.threads, warm_dir, overrides)
    cfg = base.cfg
    args.n_rl = n_rl = min(args.rl_prompts, len(base.splits()["train"]))
    args.n_eval = n_eval = min(args.eval_samples, len(base.splits()["heldout"]))
    chosen = [v for v in args.variants.split(",") if v] or list(VARIANTS)
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        _fail(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}")
    variants = [k for k in VARIANTS if k in chosen and not (args.no_ablation and k.endswith("_only"))]
    expect = {
        "task": "multi_step" if args.multi_step else "single_turn",
        "seed": args.seed,
        "budget_s_per_variant": args.budget_s,
        "clock": args.clock,
        "rl_prompts": n_rl,
        "eval_samples": n_eval,
        "eval_every": args.eval_every,
        "warm_start_step": base.result("sft")["chosen_step"],
    }
    results: dict[str, Any] = {}
    if "vanilla" not in variants:  # compare with (a) from an earlier run, checked before any training
        if not args.reference:
            _fail("--variants without vanilla needs --reference EFFICIENCY_JSON (the run holding (a))")
        try:
            results["vanilla"] = reference_vanilla(args.reference, expect)
        except ValueError as e:
            _fail(str(e))
    for name in variants:
        print(f"== {name}: {args.budget_s:.0f} s of training", flush=True)
        knobs = variant_knobs(name, args, cfg.train.grpo.learning_rate)
        results[name] = train_variant(base, out / "runs" / name, knobs, args)
    a = results["vanilla"]["curve"]
    report: dict[str, Any] = {
        **expect,
        "environment": environment(),
        "vanilla_from": args.reference if "vanilla" not in variants else "this run",
        "variants": results,
        "speedup": {k: speedup(a, r["curve"]) for k, r in results.items() if k != "vanilla"},
        "end_accuracy": {k: r["curve"][-1]["accuracy"] for k, r in results.items()},
    }
    ends = report["end_accuracy"]
    report["end_ge_vanilla"] = {k: ends[k] >= ends["vanilla"] for k in ends if k != "vanilla"}
    name = "efficiency_multi_step" if args.multi_step else "efficiency"
    (out / f"{name}.json").write_text(json.dumps(report, indent=1))
    plot(results, out / f"{name}.png", f"held-out accuracy vs training time ({report['task']})")
    print(
        "\n| variant | steps | best acc | end acc | rollouts | tokens trained | rollout s | update s "
        "| speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for k, r in results.items():
        sp_k = report["speedup"].get(k, {}).get("speedup")
        best, end = max(p["accuracy"] for p in r["curve"]), r["curve"][-1]["accuracy"]
        if k == "vanilla":
            ratio = "-"
        elif not report["speedup"][k]["time_a_s"]:
            ratio = "n/a ((a) never improved)"
        else:
            ratio = "never reached" if sp_k is None else f"{sp_k:.2f}x"
        print(
            f"| {k} | {r['steps']} | {best:.3f} | {end:.3f} | {r['rollouts_generated']:.0f} | "
            f"{r['tokens_trained']:.0f} | {r['rollout_s']:.0f} | {r['update_s']:.0f} | {ratio} |"
        )
    for k, sp_k in report["speedup"].items():
        shown = None if sp_k["speedup"] is None else round(sp_k["speedup"], 2)
        print(
            f"\nspeed-up {k} vs vanilla at vanilla's best accuracy {sp_k['target_accuracy']:.3f}: {shown}; "
            f"end accuracy >= vanilla's: {report['end_ge_vanilla'][k]}"
        )
    print(f"wrote {out / (name + '.json')} and {out / (name + '.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
