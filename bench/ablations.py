"""Reward ablations at equal compute: what each paper's reward choice does to a small model.

From one SFT warm start (a quickstart run stopped after its warm-start evaluation), GRPO is trained
with each reward for the same training time on the chosen clock (CPU time by default: the process's
own work, whatever else runs on the machine), for several GRPO seeds:

  binary         Tool-N1's binary reward: the reasoning format AND exactly the right calls
  fine_grained   Tool-N1 Table 3's fine-grained reward (partial credit for the reasoning format and
                 for the right function names; `tooltune.rewards.fine_grained`)
  no_format      binary without the reasoning format (calls only; the format is logged, not rewarded)
  r2if           R2IF's composite 3 * binary + CER + SMV; the CER student is the warm start itself
                 (the quickstart-scale student), SMV uses all-MiniLM-L6-v2

Every trained checkpoint (and the warm start) is then evaluated greedily on the held-out split
(exact match with the strict format, as the quickstart reports it, and calls-only exact match, as
BFCL scores) and on the unseen-tools split, and ACE (R2IF's average CoT effectiveness: mean CER with
the same student) is measured on held-out samples that call a tool. `--summarize` reads the finished
runs into a table (`bench/_ablations_report.py`): means over seeds, differences against the binary
reward paired on the same samples and seeds with their standard errors, the papers' numbers beside
ours, and a verdict per claim.

Each run writes `OUT/<profile>/runs/<variant>_seed<S>/result.json` when it finishes; a finished run is
skipped when the command runs again (resume), an unfinished one is redone. `--shard K/N` runs every
N-th run of the list, so two processes can share the work (one torch thread each).

Run: python bench/ablations.py --out DIR [--profile quickstart|paper] [--seeds 0,1,2]
         [--variants binary,fine_grained,no_format,r2if] [--budget-s 150] [--clock cpu] [--shard 0/2]
     python bench/ablations.py --summarize --out DIR [--profile quickstart]
     python bench/ablations.py --out DIR --diagnose-unseen NAME=MODEL_DIR,...   (unseen_tools.json: exact
         match, pass@8, and whether the answers call training tools, offered tools or nothing)
     (or `tooltune bench ablations ...`; `--mini` is a seconds-long smoke run)
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

from bench._ablations_report import (  # noqa: E402  (after the path set-up above)
    PROFILES,
    VARIANTS,
    ace_summary,
    summarize_dir,
)

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/bench_ablations", help="output folder")
    ap.add_argument("--profile", choices=tuple(PROFILES), default="quickstart", help="task profile (config)")
    ap.add_argument("--seeds", default="0,1,2", help="GRPO seeds (the warm start is the same for all)")
    ap.add_argument("--warm-seed", type=int, default=0, help="seed of the warm start (data, model, SFT)")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma-separated subset of {list(VARIANTS)}")
    ap.add_argument("--budget-s", type=float, default=None, help="training time per run on --clock "
                    "(held-out evaluations excluded; default 150, --mini 3)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="clock of the budget: cpu = process CPU time (default), wall = elapsed time")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--eval-every", type=int, default=20, help="validation curve every N GRPO steps")
    ap.add_argument("--curve-samples", type=int, default=200, help="held-out samples of the curve")
    ap.add_argument("--ace-samples", type=int, default=200, help="held-out samples (calling a tool) for ACE")
    ap.add_argument("--cer-k", type=int, default=5, help="CER / ACE continuations per reasoning (R2IF: 5)")
    ap.add_argument("--cer-max-new-tokens", type=int, default=48, help="longest student continuation")
    ap.add_argument("--shard", default="0/1", help="K/N: run every N-th run starting at the K-th")
    ap.add_argument("--warm-start", default="", help="quickstart run folder to reuse as the warm start")
    ap.add_argument("--no-start-after", default="", metavar="HH:MM",
                    help="start no run after this UTC time of day (finished runs are kept; rerun to go on)")
    ap.add_argument("--diagnose-unseen", default="", metavar="NAME=DIR,...",
                    help="only diagnose these checkpoints on the unseen tools (unseen_tools.json)")
    ap.add_argument("--summarize", action="store_true", help="only read the finished runs into the table")
    ap.add_argument("--mini", action="store_true", help="smoke-test sizes (seconds, not a measurement)")
    args = ap.parse_args(argv)
    if args.budget_s is None:
        args.budget_s = 3.0 if args.mini else 150.0
    unknown = sorted(set(args.variants.split(",")) - set(VARIANTS))
    if unknown:
        ap.error(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}")
    try:
        k, n = (int(x) for x in args.shard.split("/"))
        assert 0 <= k < n
    except (ValueError, AssertionError):
        ap.error(f"--shard: expected K/N with 0 <= K < N, got {args.shard!r}")
    args.shard_k, args.shard_n = k, n
    args.seed_list = [int(s) for s in args.seeds.split(",") if s != ""]
    return args


def run_list(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(variant, seed) of this process: seed-major order, every N-th from the K-th (`--shard K/N`)."""
    chosen = [v for v in VARIANTS if v in args.variants.split(",")]
    runs = [(v, s) for s in args.seed_list for v in chosen]
    return runs[args.shard_k :: args.shard_n]


def cer_params(args: argparse.Namespace, student: Path, cache: Path) -> dict[str, Any]:
    """CER's parameters: the warm start as the student (R2IF's K and temperature), a v_base cache."""
    return {"student": {"model": str(student)}, "k": args.cer_k, "temperature": 0.4,
            "max_new_tokens": args.cer_max_new_tokens, "cache_path": str(cache), "seed": 0}


def variant_knobs(variant: str, seed: int, args: argparse.Namespace, base: Any, run_dir: Path) -> dict:
    """Training-config overrides of one run: its reward and the GRPO seed."""
    reward = VARIANTS[variant]["reward"]
    params: dict[str, Any] = {}
    if "cer" in reward["components"]:
        cache = run_dir.parent / f"{run_dir.name}_v_base.sqlite"
        params["cer"] = cer_params(args, base.model_dir("sft"), cache)
    return {
        "reward.components": dict(reward["components"]),
        "reward.require_format": reward.get("require_format", True),
        "reward.params": params,
        "run.seed": seed,
    }


def evaluate(base: Any, model_dir: Path, args: argparse.Namespace, ace_cache: Path) -> dict[str, Any]:
    """Greedy held-out and unseen-tools completions of one checkpoint, scored strictly and calls-only,
    with the per-sample hits (for paired differences), and ACE on held-out samples that call a tool."""
    from tooltune.experiment.measure import backend, load
    from tooltune.experiment.stats import summarize
    from tooltune.generation import GenerationRequest
    from tooltune.prompts import render_prompt
    from tooltune.rewards.binary import binary_reward
    from tooltune.rewards.cer import CERReward

    t = base.cfg.train
    template = t.data.template
    model, tok = load(model_dir)
    model.eval()
    be = backend(base, model, tok)
    out: dict[str, Any] = {}
    completions: dict[str, list[str]] = {}
    for split in ("heldout", "unseen_tools"):
        samples = base.splits()[split]
        requests = [GenerationRequest(messages=render_prompt(s, t.data), n=1, temperature=0.0,
                                      max_new_tokens=t.diagnostics.eval_max_new_tokens) for s in samples]
        texts = [r[0] for r in be.generate(requests)]
        completions[split] = texts
        for name, strict in (("exact", True), ("calls", False)):
            hits = [binary_reward(c, s.answer, template=template, require_format=strict)
                    for c, s in zip(texts, samples, strict=True)]
            out[f"{split}_{name}"] = {**summarize(hits, samples), "hits": hits}
    held = base.splits()["heldout"]
    idx = [i for i, s in enumerate(held) if s.answer][: args.ace_samples]
    cer = CERReward(**{**cer_params(args, base.model_dir("sft"), ace_cache), "template": template})
    values: list[float] = []
    for start in range(0, len(idx), 64):  # per-sample R_cer (paired differences), 64 entries per student call
        part = idx[start : start + 64]
        values += cer.batch([completions["heldout"][i] for i in part], [held[i].answer for i in part],
                            prompt=[render_prompt(held[i], t.data) for i in part],
                            sample_id=[held[i].id for i in part])
    out["ace"] = {**ace_summary(values), "values": values, "ids": [held[i].id for i in idx]}
    out["completions_heldout_head"] = completions["heldout"][:20]
    return out


def diagnose_unseen(base: Any, model_dir: Path, k: int) -> dict[str, Any]:
    """Where a checkpoint stands on the unseen tools: greedy exact match; the share of greedy answers
    that call only offered tools, and that call a training tool (never offered in this split: the
    memorized name of the request's keyword); pass@k at temperature 1 (does sampling ever write the
    new tool's call?)."""
    from tooltune.data.synthetic.quickstart_task import TRAIN_TOOLS
    from tooltune.experiment.measure import backend, load
    from tooltune.experiment.stats import binomial
    from tooltune.generation import GenerationRequest
    from tooltune.parsing import parse_calls
    from tooltune.prompts import grammar_for, render_prompt
    from tooltune.rewards.binary import binary_reward

    t = base.cfg.train
    model, tok = load(model_dir)
    model.eval()
    be = backend(base, model, tok)
    samples = base.splits()["unseen_tools"]
    grammar = grammar_for(t.data.template).name
    train_names = {tool.name for tool in TRAIN_TOOLS}
    out: dict[str, Any] = {}
    for n, temperature in ((1, 0.0), (k, 1.0)):
        longest = t.diagnostics.eval_max_new_tokens
        requests = [GenerationRequest(messages=render_prompt(s, t.data), n=n, temperature=temperature,
                                      max_new_tokens=longest, seed=0) for s in samples]
        texts = be.generate(requests)
        hits = [max(binary_reward(c, s.answer, template=t.data.template) for c in cs)
                for cs, s in zip(texts, samples, strict=True)]
        if n == 1:
            out["exact"] = binomial(hits)
            names = [[c.name for c in (parse_calls(cs[0], grammar).calls or [])] for cs in texts]
            offered = [{tool.name for tool in s.tools} for s in samples]
            out["calls_offered_only"] = binomial([1.0 if ns and set(ns) <= o else 0.0
                                                  for ns, o in zip(names, offered, strict=True)])
            out["calls_a_training_tool"] = binomial([1.0 if set(ns) & train_names else 0.0 for ns in names])
            out["no_call"] = binomial([0.0 if ns else 1.0 for ns in names])
        else:
            out[f"pass_at_{k}"] = binomial(hits)
    return out


def one_run(base: Any, variant: str, seed: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Train (`bench/efficiency.train_variant`, the budget on --clock) and evaluate one (variant, seed)."""
    from bench.efficiency import train_variant

    run_dir = folder / "runs" / f"{variant}_seed{seed}"
    knobs = variant_knobs(variant, seed, args, base, run_dir)
    print(f"== {variant} seed {seed}: {args.budget_s:.0f} s of {args.clock} time", flush=True)
    for leftover in run_dir.parent.glob(f"{run_dir.name}_v_base.sqlite*"):
        leftover.unlink()  # a redone run pays for its own v_base, as the first try did
    t = time.perf_counter()
    summary = train_variant(base, run_dir, knobs, args)
    ev = evaluate(base, run_dir / "final", args, folder / "ace_v_base.sqlite")
    summary.pop("settings", None)
    return {"variant": variant, "seed": seed, "knobs": knobs, "train": summary, "eval": ev,
            "wall_s": time.perf_counter() - t}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    profile = "mini" if args.mini else args.profile
    folder = Path(args.out) / profile
    if args.summarize:
        return summarize_dir(folder)

    import torch  # deferred: heavy

    from bench.efficiency import warm_start
    from tooltune.experiment.report import environment

    torch.set_num_threads(args.threads)
    config = CONFIGS / PROFILES[profile]
    warm = Path(args.warm_start) if args.warm_start else folder / "warm_start"
    base = warm_start(config, args.warm_seed, args.threads, warm, {})
    if args.diagnose_unseen:
        found = {}
        for item in args.diagnose_unseen.split(","):
            name, _, path = item.partition("=")
            found[name] = diagnose_unseen(base, Path(path), 8)
            shown = ", ".join(f"{k} {v['accuracy']:.3f} ± {v['se']:.3f}" for k, v in found[name].items())
            print(f"{name}: {shown}", flush=True)
        (folder / "unseen_tools.json").write_text(json.dumps(found, indent=1))
        return 0
    args.n_rl = len(base.splits()["train"])
    args.n_eval = min(args.curve_samples, len(base.splits()["heldout"]))
    meta = {"profile": profile, "config": f"configs/{config.name}", "warm_start": str(warm),
            "warm_start_step": base.result("sft")["chosen_step"], "budget_s": args.budget_s,
            "clock": args.clock, "threads": args.threads, "cer_k": args.cer_k, "environment": environment()}
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))
    ws = folder / "runs" / "warm_start" / "result.json"
    if not ws.is_file() and args.shard_k == 0:
        ev = evaluate(base, base.model_dir("sft"), args, folder / "ace_v_base.sqlite")
        ws.parent.mkdir(parents=True, exist_ok=True)
        ws.write_text(json.dumps({"variant": "warm_start", "seed": None, "eval": ev}))
    for variant, seed in run_list(args):
        path = folder / "runs" / f"{variant}_seed{seed}" / "result.json"
        if path.is_file():
            print(f"== {variant} seed {seed}: finished earlier, skipped", flush=True)
            continue
        if args.no_start_after and time.strftime("%H:%M", time.gmtime()) >= args.no_start_after:
            print(f"== {variant} seed {seed}: not started (--no-start-after {args.no_start_after} UTC)",
                  flush=True)
            continue
        result = one_run(base, variant, seed, args, folder)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(path)  # a run is finished or not, never half-written
        shutil.rmtree(path.parent / "grpo", ignore_errors=True)  # checkpoints are not needed any more
        e = result["eval"]
        print(f"   held-out {e['heldout_exact']['accuracy']:.3f} "
              f"(calls only {e['heldout_calls']['accuracy']:.3f}), "
              f"unseen {e['unseen_tools_exact']['accuracy']:.3f}, ACE {e['ace']['ace']:+.3f}, "
              f"{result['train']['steps']} steps", flush=True)
    return summarize_dir(folder)


if __name__ == "__main__":
    sys.exit(main())
