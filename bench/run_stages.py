"""Run some stages of a quickstart run folder in this process, in the order given, each skipped when finished.

`tooltune quickstart` runs a profile's stages in order. A stage that does not need the ones before it
can run in a second process on another core: the screen and GRPO here while `bench/continued_sft.py`
or the warm start's evaluation runs beside them. Each stage is seeded and timed as in a run in order
(`Pipeline.run_stage`), and writes its result where the quickstart reads it, so a later
`tooltune quickstart ... --out RUN` skips it.

    python bench/run_stages.py runs/real42 screen grpo --threads 1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a quickstart run folder (its config.yaml)")
    ap.add_argument("stages", nargs="+", help="stage names of the run's profile, run in this order")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of this process (the run's "
                    "`threads` setting is part of its identity and is not changed)")
    args = ap.parse_args()

    import torch

    from tooltune.experiment.config import load_config
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.real import real_profile
    from tooltune.experiment.synthetic import synthetic_profile

    if not (args.run / "config.yaml").is_file():
        raise SystemExit(f"{args.run}: no config.yaml (start it: tooltune quickstart ... --out {args.run})")
    cfg = load_config(args.run / "config.yaml")
    profile = real_profile() if cfg.profile == "real" else synthetic_profile()
    unknown = [s for s in args.stages if s not in profile.stages]
    if unknown:
        raise SystemExit(f"stages: {', '.join(unknown)} not a stage of the {cfg.profile} profile "
                         f"({', '.join(profile.stages)})")
    torch.set_num_threads(args.threads)
    pipe = Pipeline(args.run, cfg, say=lambda line: print(line, flush=True), profile=profile)
    for stage in args.stages:
        pipe.run_stage(stage)


if __name__ == "__main__":
    main()
