"""CLI: `tooltune quickstart [--config FILE] [--out DIR] [--stop-after STAGE] [--<key> VALUE ...]`.

Every setting of `QuickstartConfig` has a flag (`--seed 1`, `--threads 1`,
`--train.grpo.learning_rate 1e-4`, `--warm_start.threshold 0.5`) that overrides the config file.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from tooltune.config import ConfigError, add_arguments, given_overrides, prepare_output
from tooltune.quickstart.config import DEFAULT_CONFIG, DERIVED, QuickstartConfig, load_config


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
        "configs/quickstart_mini.yaml is the minutes-long smoke run)",
    )
    p.add_argument("--out", default="runs/quickstart", help="run directory (default: runs/quickstart)")
    p.add_argument("--stop-after", default=None, help="stop after this stage (resume later)")
    add_arguments(p, QuickstartConfig, exclude=tuple(DERIVED), title="settings (override --config)")
    p.set_defaults(func=_handle)


def _handle(args: argparse.Namespace) -> int:
    # deferred: the pipeline imports torch, transformers and trl
    from tooltune.quickstart.run import STAGES, Pipeline

    logging.basicConfig(level=logging.WARNING)
    if args.stop_after and args.stop_after not in STAGES:
        raise ConfigError(
            f"--stop-after: {args.stop_after!r} is not a stage; choose one of {', '.join(STAGES)}"
        )
    cfg = load_config(args.config, given_overrides(args))
    prepare_output(args.out, "--out", folder=True)
    pipe = Pipeline(args.out, cfg)
    print(f"tooltune quickstart: seed {cfg.seed}, config {args.config}, output {args.out}")
    report = pipe.run(stop_after=args.stop_after)
    print()
    print((pipe.out / "report.md").read_text().split("\nTimings")[0])
    print(
        f"report: {pipe.out / 'report.json'}, {pipe.out / 'report.md'}; plots: {', '.join(report['plots'])}"
    )
    print(f"SFT + GRPO again with tooltune train: tooltune train --config {pipe.out / 'train.yaml'}")
    return 0
