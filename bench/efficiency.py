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

Run: python bench/efficiency.py [--out DIR] [--budget-s 300] [--seed 0] [--multi-step]
     (or `tooltune bench efficiency --out DIR`)
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def time_to_reach(curve: list[dict[str, Any]], target: float) -> float | None:
    """First training time at which the curve's accuracy is >= target (None if never)."""
    for point in curve:
        if point["accuracy"] >= target - 1e-12:
            return point["train_s"]
    return None


def speedup(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Time for (a) to reach its best accuracy divided by the time for (b) to reach the same accuracy."""
    best = max(p["accuracy"] for p in a)
    t_a, t_b = time_to_reach(a, best), time_to_reach(b, best)
    # no ratio when (a) never improved on the warm start (t_a == 0) or (b) never got there
    ratio = (t_a / t_b if t_b else math.inf) if t_b is not None and t_a else None
    return {"target_accuracy": best, "time_a_s": t_a, "time_b_s": t_b, "speedup": ratio}


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


def plot(results: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, r in results.items():
        ax.plot(
            [p["train_s"] for p in r["curve"]],
            [p["accuracy"] for p in r["curve"]],
            marker="o",
            ms=3,
            label=name,
        )
    ax.set_xlabel("training wall time (s, evaluation excluded)")
    ax.set_ylabel("held-out exact match")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The bench's options; --mini shrinks sizes and the default budget to a smoke test."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/bench_efficiency", help="output folder (efficiency.json, PNG)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="training time per variant, held-out evaluations excluded (default 240; 5 with --mini)",
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
        help="learning-rate multiplier for the variants other than vanilla (vanilla keeps the quickstart's)",
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
    args = ap.parse_args(argv)
    if args.budget_s is None:
        args.budget_s = 5.0 if args.mini else 240.0
    if args.budget_s <= 0:
        ap.error(f"--budget-s: must be > 0, got {args.budget_s}")
    return args


def _fail(message: str) -> None:
    print(f"bench/efficiency.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    # deferred: torch, transformers and trl load in seconds; --help and the tests need none of them
    import torch

    from tooltune.config import set_key
    from tooltune.quickstart.config import load_config
    from tooltune.quickstart.report import environment
    from tooltune.quickstart.run import Pipeline
    from tooltune.training.diagnostics import grpo_summary
    from tooltune.training.runner import train

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    overrides: dict[str, Any] = {"seed": args.seed, "threads": args.threads}
    if args.multi_step:
        overrides.update({"task.multi_step": True, "train.reward.require_format": False})
    configs = Path(__file__).resolve().parents[1] / "configs"
    cfg = load_config(configs / ("quickstart_mini.yaml" if args.mini else "quickstart.yaml"), overrides)
    warm_dir = Path(args.warm_start) if args.warm_start else out / "warm_start"
    base = Pipeline(warm_dir, cfg, say=lambda s: print(s, flush=True))
    print("== warm start (quickstart stages data, model, sft, eval_sft; reused when present)", flush=True)
    base.run(stop_after="eval_sft")
    n_rl = min(args.rl_prompts, len(base.splits()["train"]))
    n_eval = min(args.eval_samples, len(base.splits()["heldout"]))
    chosen = [v for v in args.variants.split(",") if v] or list(VARIANTS)
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        _fail(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}")
    variants = [k for k in VARIANTS if k in chosen and not (args.no_ablation and k.endswith("_only"))]
    expect = {
        "task": "multi_step" if args.multi_step else "single_turn",
        "seed": args.seed,
        "budget_s_per_variant": args.budget_s,
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
        run_dir = out / "runs" / name
        shutil.rmtree(run_dir, ignore_errors=True)
        knobs = variant_knobs(name, args, cfg.train.grpo.learning_rate)
        tcfg = base.train_config("grpo")
        for key, value in {
            **knobs,
            "run.output_dir": str(run_dir),
            "run.save_steps": 10**9,  # no checkpoints: a variant is rerun, not resumed
            "grpo.max_steps": 10**6,  # the training-time budget ends training
            "grpo.max_seconds": args.budget_s,
            "data.max_train_samples": n_rl,
            "data.val": str(warm_dir / "data" / "heldout.jsonl"),
            "data.max_val_samples": n_eval,
            "diagnostics.eval_samples": n_eval,
            "diagnostics.eval_every": args.eval_every,
        }.items():
            set_key(tcfg, key, value)
        t = time.perf_counter()
        train(tcfg.validate())
        r = grpo_summary(run_dir / "metrics.jsonl")
        r["bench_wall_s"] = time.perf_counter() - t
        r["settings"] = knobs
        results[name] = r
        best = max(p["accuracy"] for p in r["curve"])
        print(
            f"   steps {r['steps']}, best held-out {best:.3f}, end {r['curve'][-1]['accuracy']:.3f}, "
            f"rollouts {r['rollouts_generated']:.0f}, tokens trained {r['tokens_trained']:.0f}, "
            f"rollout {r['rollout_s']:.0f} s / update {r['update_s']:.0f} s",
            flush=True,
        )
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
