"""Agentic GRPO demo: the quickstart's multi-step task trained in the loop on the synthetic environment.

From the quickstart's multi-step SFT warm start (a quickstart run stopped after its warm-start
evaluation), for the same training-time budget (held-out evaluations off the clock):

  agentic       episodes on the ``synthetic_chain`` environment (`tooltune.training.agentic`): the
                model's calls are executed, their results appended, generation continues; reward =
                the outcome (the executed calls equal the chain's goal), tool-message tokens masked
  single_step   the quickstart's multi-step GRPO: one step at a time with ground-truth history,
                reward = that step's tool-call correctness

Both are judged the same way: greedy episodes on held-out chain tasks (>= 1,000; chains never seen in
training), success = the environment's outcome. Reported per variant: success before and after, the
paired difference with its z against the warm start (same tasks), steps, rollout / update seconds,
turns per episode and tool-error share. JSON per seed; `--summary` aggregates seeds into one table.

Run: python bench/agentic.py --seed 0 --out runs/agentic0 [--budget-s 300] [--threads 2]
     python bench/agentic.py --summary runs/agentic0 runs/agentic1 runs/agentic2
     (or `tooltune bench agentic ...`)
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

VARIANTS = ("agentic", "single_step")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/bench_agentic", help="output folder (agentic.json)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the GRPO runs (sampling, order)")
    ap.add_argument("--warm-seed", type=int, default=None,
                    help="seed of the warm start (data, model, SFT); default: --seed")
    ap.add_argument("--budget-s", type=float, default=None, help="training s per variant (300; --mini 5)")
    ap.add_argument("--eval-tasks", type=int, default=1000, help="held-out chain tasks for the final verdict")
    ap.add_argument("--curve-tasks", type=int, default=200, help="held-out tasks per curve point")
    ap.add_argument("--eval-every", type=int, default=20, help="curve point every N steps")
    ap.add_argument("--rl-tasks", type=int, default=512, help="training chains (agentic) / their steps")
    ap.add_argument("--max-turns", type=int, default=4, help="assistant turns per episode")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"subset of {', '.join(VARIANTS)}")
    ap.add_argument("--agentic-lr-scale", type=float, default=0.5,
                    help="agentic learning rate = this x the quickstart's (at 1x one seed of three collapsed "
                    "onto answering without calls after two steps)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 when the cores are shared)")
    ap.add_argument("--warm-start", default="", help="reuse this multi-step quickstart run folder")
    ap.add_argument("--mini", action="store_true", help="smoke-test sizes (seconds, not a measurement)")
    ap.add_argument("--summary", nargs="+", metavar="DIR", help="aggregate the agentic.json of these runs")
    args = ap.parse_args(argv)
    if args.budget_s is None:
        args.budget_s = 5.0 if args.mini else 300.0
    if args.budget_s <= 0:
        ap.error(f"--budget-s: must be > 0, got {args.budget_s}")
    bad = sorted(set(args.variants.split(",")) - set(VARIANTS))
    if bad:
        ap.error(f"--variants: unknown {bad}; choose from {list(VARIANTS)}")
    return args


def summary_table(reports: list[dict[str, Any]]) -> str:
    """Markdown: one row per (seed, variant), then the mean over seeds per variant."""
    lines = [
        "| seed | variant | success before | success after | gain (pts) | z | steps | rollout s | update s "
        "| turns | tool errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    means: dict[str, list[dict[str, Any]]] = {}
    for rep in reports:
        for name, v in rep["variants"].items():
            means.setdefault(name, []).append(v)
            lines.append(
                f"| {rep['seed']} | {name} | {rep['warm_start']['success']:.1%} | "
                f"{v['after']['success']:.1%} | "
                f"{100 * v['paired']['diff']:+.1f} | {v['paired']['z']:.1f} | {v['steps']} | "
                f"{v['rollout_s']:.0f} | {v['update_s']:.0f} | {v['after']['turns']:.2f} | "
                f"{v['after']['tool_error_share']:.1%} |"
            )
    for name, vs in means.items():
        gain = sum(v["paired"]["diff"] for v in vs) / len(vs)
        after = sum(v["after"]["success"] for v in vs) / len(vs)
        lines.append(f"| mean | {name} | | {after:.1%} | {100 * gain:+.1f} | | | | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.summary:
        reports = [json.loads((Path(d) / "agentic.json").read_text()) for d in args.summary]
        print(summary_table(reports))
        return 0

    # deferred: torch, transformers and trl load in seconds; --help, --summary and the tests need none
    import torch

    from tooltune.config import set_key
    from tooltune.data.synthetic.chain_tasks import chain_tasks
    from tooltune.experiment.config import load_config
    from tooltune.experiment.measure import load
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.report import environment
    from tooltune.experiment.stats import paired
    from tooltune.generation import evaluate_episodes
    from tooltune.schema import write_jsonl
    from tooltune.training.diagnostics import grpo_summary
    from tooltune.training.runner import train

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n_eval = 20 if args.mini else args.eval_tasks
    warm_seed = args.seed if args.warm_seed is None else args.warm_seed
    overrides: dict[str, Any] = {
        "seed": warm_seed,
        "threads": args.threads,
        "task.multi_step": True,
        "task.n_heldout": max(3000, 3 * n_eval),  # three samples per chain: n_eval whole chains
        "train.reward.require_format": False,
    }
    configs = Path(__file__).resolve().parents[1] / "configs"
    cfg = load_config(configs / ("quickstart_mini.yaml" if args.mini else "quickstart.yaml"), overrides)
    warm_dir = Path(args.warm_start) if args.warm_start else out / "warm_start"
    base = Pipeline(warm_dir, cfg, say=lambda s: print(s, flush=True))
    print("== warm start (multi-step quickstart: data, model, sft, eval_sft; reused)", flush=True)
    base.run(stop_after="eval_sft")
    splits = base.splits()
    heldout = chain_tasks(splits["heldout"])[:n_eval]
    train_tasks = chain_tasks(splits["train"])[: args.rl_tasks]
    template = cfg.train.data.template
    write_jsonl(train_tasks, str(out / "tasks_train.jsonl"))
    write_jsonl(heldout, str(out / "tasks_heldout.jsonl"))
    turn_tokens = cfg.train.grpo.max_completion_length

    def judge(model_dir: Path) -> dict[str, Any]:
        model, tok = load(model_dir)
        return evaluate_episodes(model, tok, heldout, template, max_turns=args.max_turns,
                                 max_new_tokens=turn_tokens, batch_size=64)

    print(f"== warm start: greedy episodes on {len(heldout)} held-out chain tasks", flush=True)
    before = judge(base.model_dir("sft"))
    print(f"   success {before['success']:.3f}, turns {before['turns']:.2f}, ends {before['ends']}",
          flush=True)
    report: dict[str, Any] = {
        "seed": args.seed,
        "warm_seed": warm_seed,
        "budget_s_per_variant": args.budget_s,
        "eval_tasks": len(heldout),
        "rl_tasks": len(train_tasks),
        "max_turns": args.max_turns,
        "environment": environment(),
        "warm_start": {k: v for k, v in before.items() if k != "outcomes"},
        "variants": {},
    }
    for name in args.variants.split(","):
        print(f"== {name}: {args.budget_s:.0f} s of training", flush=True)
        run_dir = out / "runs" / name
        shutil.rmtree(run_dir, ignore_errors=True)
        tcfg = base.train_config("grpo")
        knobs: dict[str, Any] = {
            "run.output_dir": str(run_dir),
            "run.seed": args.seed,
            "run.save_steps": 10**9,  # a variant is rerun, not resumed
            "grpo.max_steps": 10**6,  # the training-time budget ends training
            "grpo.max_seconds": args.budget_s,
            "grpo.shared_prefix": True,  # the library default (the quickstart pins the ordinary update)
            "diagnostics.eval_every": args.eval_every,
            "diagnostics.eval_samples": args.curve_tasks,
            "data.max_val_samples": args.curve_tasks,
        }
        if name == "agentic":
            knobs.update({
                "data.train": str(out / "tasks_train.jsonl"),
                "data.val": str(out / "tasks_heldout.jsonl"),
                "agentic.enabled": True,
                "agentic.max_turns": args.max_turns,
                "grpo.learning_rate": tcfg.grpo.learning_rate * args.agentic_lr_scale,
                "reward.components": {"outcome": 1.0, "turn_format": 0.0},
                "reward.require_format": True,  # a per-step reward's switch: no episode reward takes it
            })
        else:
            knobs["data.max_train_samples"] = 3 * args.rl_tasks
        for key, value in knobs.items():
            set_key(tcfg, key, value)
        t = time.perf_counter()
        train(tcfg.validate())
        s = grpo_summary(run_dir / "metrics.jsonl")
        after = judge(run_dir / "final")
        pair = paired(after["outcomes"], before["outcomes"])
        report["variants"][name] = {
            "steps": s["steps"],
            "rollout_s": s["rollout_s"],
            "update_s": s["update_s"],
            "curve": s["curve"],
            "wall_s": time.perf_counter() - t,
            "after": {k: v for k, v in after.items() if k != "outcomes"},
            "paired": pair,
            "settings": knobs,
        }
        print(f"   steps {s['steps']}, success {before['success']:.3f} -> {after['success']:.3f} "
              f"({100 * pair['diff']:+.1f} points, z {pair['z']:.1f})", flush=True)
    (out / "agentic.json").write_text(json.dumps(report, indent=1, default=str))
    print()
    print(summary_table([report]))
    print(f"wrote {out / 'agentic.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
