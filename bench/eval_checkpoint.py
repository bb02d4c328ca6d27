"""Evaluate one checkpoint of a real-profile run folder on some of its benchmark suites, resumably.

The quickstart's evaluation stages score every suite of `benchmarks.suites`; a sweep arm
(`bench/grpo_sweep.py`) or a verdict run often needs only some of them (ACEBench scores 0.0 on every
checkpoint of the 135M model and costs as much as the two others together). This scores checkpoint NAME
(base, sft, grpo, sft_continued) of run folder RUN on the suites named, through the same code as the
stage (`tooltune.experiment.real.evaluate_checkpoint`: official scorers, the run's fixed subsets, then
the unseen-tools split), into RUN/evals/NAME/<suite>/ (finished entries are kept: a killed evaluation
resumes), and writes the result, with its wall and CPU seconds, to RUN/partial_eval_NAME.json:
`bench/grpo_verdict.py` reads it. For NAME sft_continued the run's `sft_continued` stage runs first
when it has not (SFT continued from the warm start for the screen's and GRPO's CPU time), so the
equal-compute rival of an arm is made and scored without the evaluation stages in between.

    python bench/eval_checkpoint.py runs/screen42/screened_lr_1e-5 grpo --suites bfcl,apibank --threads 1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a real-profile quickstart run folder (or a sweep arm's)")
    ap.add_argument("name", help="the checkpoint: base, sft, grpo or sft_continued")
    ap.add_argument("--suites", default="bfcl,apibank", help="comma-separated suites of benchmarks.suites")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()

    import torch

    from tooltune.experiment.config import load_config
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.real import CHECKPOINTS, evaluate_checkpoint, real_profile

    if args.name not in CHECKPOINTS:
        raise SystemExit(f"name: one of {', '.join(CHECKPOINTS)}, got {args.name!r}")
    cfg = load_config(args.run / "config.yaml")
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = [s for s in suites if s not in cfg.benchmarks.suites]
    if unknown:
        raise SystemExit(f"--suites: {', '.join(unknown)} not in the run's benchmarks.suites "
                         f"({', '.join(cfg.benchmarks.suites)})")
    torch.set_num_threads(args.threads)
    pipe = Pipeline(args.run, cfg, say=lambda line: print(line, flush=True), profile=real_profile())
    pipe.cfg.benchmarks.suites = {k: v for k, v in pipe.cfg.benchmarks.suites.items() if k in suites}
    if args.name == "sft_continued":
        pipe.run_stage("sft_continued")  # skipped when finished
    wall, cpu = time.perf_counter(), time.process_time()
    res = evaluate_checkpoint(pipe, args.name)
    res["timing"] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                     "threads": args.threads}
    out = args.run / f"partial_eval_{args.name}.json"
    out.write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
    for bench, r in res["benchmarks"].items():
        print(f"{bench}: {r['headline_key']} {100 * r['headline']:.1f} ± {100 * r['headline_se']:.1f}")
    unseen = res["unseen_tools"]
    print(f"unseen tools: {100 * unseen['accuracy']:.1f} ± {100 * unseen['se']:.1f}  -> {out}")


if __name__ == "__main__":
    main()
