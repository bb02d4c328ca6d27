"""The real-model recipe on one GPU, its evaluations in a second process beside the training.

`tooltune quickstart --config configs/quickstart_real_smollm2.yaml` runs its nine stages one after the other.
On a GPU a 135M model leaves the device mostly idle (each decoding step is a few small kernels), so this
script runs the same stages of the same run folder in two processes:

  train   data -> model -> sft -> grpo -> sft_continued
  eval    eval_base (once `data` is written) -> eval_sft -> eval_grpo -> eval_sft_continued, each as soon as
          its checkpoint is finished

Every stage is `Pipeline.run_stage`, seeded by its place in the recipe, so the stages are the quickstart's
own; only their overlap differs (GRPO shares the device with the first two evaluations, continued SFT
with the third, so the equal-time comparison stays even). Stages already finished are skipped: a killed
run resumes with the same command, or with `tooltune quickstart` and the same settings. The report
(report.md / report.json, plots) is written from whatever finished (`--role report` writes it alone).

Run: python bench/device/real_recipe.py --config configs/quickstart_real_smollm2.yaml --out DIR \
         [--set KEY=VALUE ...]      (the quickstart's dotted settings, e.g. --set train.run.device=cuda)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))



def stage_plan() -> tuple[list[str], dict[str, str]]:
    """The recipe's training stages in order, and each evaluation with the stage it waits for: the stage
    that writes its checkpoint (`data` for the untrained model, which needs only the splits)."""
    from tooltune.experiment.real import CHECKPOINTS, REAL_STAGES

    train = [s for s in REAL_STAGES if not s.startswith("eval_")]
    return train, {f"eval_{c}": "data" if c == "base" else c for c in CHECKPOINTS}


def pipeline(args: argparse.Namespace, role: str):  # noqa: ANN201 (a tooltune Pipeline; import deferred)
    from tooltune.experiment.config import load_config
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.real import real_profile
    from tooltune.rundir.lock import RunFolderBusy

    overrides = [x for kv in args.set for x in (f"--{kv.partition('=')[0]}", kv.partition("=")[2])]
    cfg = load_config(args.config, overrides)
    for attempt in range(30):  # the two processes check the run's identity under its lock, one at a time
        try:
            return Pipeline(args.out, cfg, say=lambda line: print(f"[{role}] {line}", flush=True),
                            profile=real_profile())
        except RunFolderBusy:
            if attempt == 29:
                raise
            time.sleep(1)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run_role(args: argparse.Namespace) -> int:
    import torch

    p = pipeline(args, args.role)
    torch.set_num_threads(p.cfg.threads)
    train, evals = stage_plan()
    if args.role == "train":
        for name in train:
            p.run_stage(name)
        return 0
    for name, needs in evals.items():
        while not p.done(needs):
            if not alive(args.train_pid):
                print(f"[eval] {name}: the training process ended before {needs} finished", flush=True)
                return 1
            time.sleep(2)
        p.run_stage(name)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "quickstart_real_smollm2.yaml"))
    ap.add_argument("--out", required=True, help="the run folder (resumed when it exists)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a quickstart setting")
    ap.add_argument("--role", choices=("all", "train", "eval", "report"), default="all",
                    help="report: only write the report from the stages finished so far (after a kill)")
    ap.add_argument("--train-pid", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role == "report":
        pipeline(args, "report").report()
        return 0
    if args.role != "all":
        return run_role(args)
    p = pipeline(args, "main")  # writes (or checks) the run's identity before the two processes start
    base = [sys.executable, str(Path(__file__).resolve()), "--config", args.config, "--out", args.out]
    base += [x for kv in args.set for x in ("--set", kv)]
    start = time.perf_counter()
    train = subprocess.Popen(base + ["--role", "train"])
    evals = subprocess.Popen(base + ["--role", "eval", "--train-pid", str(train.pid)])
    codes = train.wait(), evals.wait()
    report = p.report()
    print(f"[main] train exit {codes[0]}, eval exit {codes[1]}, {time.perf_counter() - start:.0f} s wall; "
          f"report: {p.out / 'report.md'}", flush=True)
    print((p.out / "report.md").read_text(encoding="utf-8").split("\nTimings")[0], flush=True)
    return 0 if codes == (0, 0) and report else 1


if __name__ == "__main__":
    sys.exit(main())
