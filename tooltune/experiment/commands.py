"""CLI: `tooltune quickstart [--config FILE] [--out DIR] [--stop-after STAGE] [--<key> VALUE ...]`.

Every setting of `QuickstartConfig` has a flag (`--seed 1`, `--threads 1`,
`--train.grpo.learning_rate 1e-4`, `--warm_start.threshold 0.5`) that overrides the config file.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from tooltune.config import ConfigError, add_arguments, given_overrides, prepare_output
from tooltune.experiment.config import DEFAULT_CONFIG, DERIVED, QuickstartConfig, load_config


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "quickstart",
        help="train a tiny model to call tools on CPU: SFT warm start, then GRPO; writes a report",
        description="Offline CPU demo (measured times: docs/quickstart.md): build a tiny model, generate the "
        "synthetic task, SFT warm start, GRPO with the binary reward, evaluate, write DIR/report.{json,md} "
        "and PNGs. Running it again on the same DIR resumes from the last finished stage "
        "(SFT and GRPO also from inside the stage). Settings come from --config; any setting can be "
        "overridden with its own flag.",
    )
    p.add_argument(
        "--config",
        default=str(DEFAULT_CONFIG),
        help="quickstart YAML (default: the repository's configs/quickstart.yaml, the measured settings; "
        "configs/quickstart_mini.yaml is the minutes-long smoke run; "
        "configs/quickstart_real_smollm2.yaml the real-model recipe on the official benchmarks)",
    )
    p.add_argument("--out", default="runs/quickstart", help="run directory (default: runs/quickstart)")
    p.add_argument("--stop-after", default=None, help="stop after this stage (resume later)")
    p.add_argument(
        "--branch-from",
        default=None,
        metavar="DIR",
        help="start --out from the finished stages before GRPO of the quickstart run in DIR (its data, "
        "warm start and their evaluations; hard links) and run GRPO and the later stages with these "
        "settings: a GRPO ablation from the same warm start. Only train.reward.*, train.grpo.*, "
        "train.filter.*, train.downsample.* and train.diagnostics.eval_every may differ from DIR's settings",
    )
    add_arguments(p, QuickstartConfig, exclude=tuple(DERIVED), title="settings (override --config)")
    p.set_defaults(func=_handle)


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def busy_machine_note(threads: int, resuming: bool, load: float | None = None,
                      cores: int | None = None) -> str | None:
    """One line to print at start when other work already keeps the cores busy, else None.

    `load` is the 1-minute load average (runnable processes) and `cores` the cores available; the cores
    left free are `cores - load`. The measured times assume `threads` free cores: on a loaded machine
    several spinning OpenMP threads per process wait on each other and a step gets several times
    slower. The note names what to pass; the thread count stays the user's choice (it is part of the
    run's settings, which a resumed run keeps)."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average on this system
            return None
    cores = cores or available_cores()
    free = max(0.0, cores - load)
    if free >= threads - 0.5:
        return None
    busy = f"the machine is busy (load {load:.1f} on {cores} cores, about {free:.0f} free)"
    if threads > 1 and not resuming:
        return (f"{busy}: {threads} torch threads will run several times slower than the measured times; "
                f'pass --threads 1 (make demo ARGS="--threads 1")')
    return f"{busy}: expect it to run slower than the measured times"


def _handle(args: argparse.Namespace) -> int:
    # deferred: the pipeline imports torch, transformers and trl
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.synthetic import synthetic_profile

    logging.basicConfig(level=logging.WARNING)
    cfg = load_config(args.config, given_overrides(args))
    profile = synthetic_profile()
    if cfg.profile == "real":
        from tooltune.experiment.real import base_model_path, real_profile  # deferred: imports torch

        profile = real_profile()
    if args.stop_after and args.stop_after not in profile.stages:
        raise ConfigError(f"--stop-after: {args.stop_after!r} is not a stage of the {cfg.profile} profile; "
                          f"choose one of {', '.join(profile.stages)}")
    if cfg.profile == "real":
        base_model_path(cfg.model)
    if args.branch_from:
        from tooltune.experiment.branch import branch, branch_notes, plan_branch

        plan_branch(args.branch_from, args.out, cfg, profile)  # refusals before --out is written
    resuming = (Path(args.out) / "run.json").is_file()
    prepare_output(args.out, "--out", folder=True)
    pipe = Pipeline(args.out, cfg, profile=profile)
    if args.branch_from:
        branch(pipe, args.branch_from)
        print("tooltune quickstart: " + " ".join(branch_notes(pipe.out)))
    print(f"tooltune quickstart: seed {cfg.seed}, config {args.config}, output {args.out}")
    note = busy_machine_note(cfg.threads, resuming=resuming)
    if note:
        print(f"tooltune quickstart: {note}")
    report = pipe.run(stop_after=args.stop_after)
    print()
    print((pipe.out / "report.md").read_text().split("\nTimings")[0])
    print(
        f"report: {pipe.out / 'report.json'}, {pipe.out / 'report.md'}; plots: {', '.join(report['plots'])}"
    )
    print(f"SFT + GRPO again with tooltune train: tooltune train --config {pipe.out / 'train.yaml'}")
    return 0
