"""`tooltune train --config configs/NAME.yaml [--section.key value ...] [--resume]`.

Any `--dotted.key value` after the known flags overrides the preset (e.g. `--grpo.temperature 0.7
--filter.enabled true`; a bool also as `--filter.enabled` or `--no-filter.enabled`), the override
syntax of every tooltune command; `--show-config` prints the resolved config, `--list-keys` every
key with its help text, and `--verl-settings OUT` writes the recipe as verl launch settings. Before any
work the handler checks the values, the names (template, reward components), the input files and that
run.output_dir can be written, and raises; `tooltune.cli` reports a user error on one line. Heavy
libraries are imported inside the handler.
"""

from __future__ import annotations

import argparse
from typing import Any

import yaml


class _OverrideParser(argparse.ArgumentParser):
    """Collects unknown `--key value` tokens as config overrides instead of rejecting them."""

    def parse_known_args(
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, extra = super().parse_known_args(args, namespace)
        ns.overrides = list(getattr(ns, "overrides", None) or []) + list(extra)
        return ns, []


def register(subparsers: Any) -> None:
    """Add the `train` command to the tooltune CLI."""
    saved = subparsers._parser_class
    subparsers._parser_class = _OverrideParser
    try:
        p = subparsers.add_parser(
            "train",
            help="Train with GRPO (+ SFT warm start) on TRL: pre-rollout filtering, down-sampling.",
            description=__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    finally:
        subparsers._parser_class = saved
    p.add_argument("--config", help="YAML preset, e.g. configs/efficient_single_turn.yaml")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from the last complete checkpoint in run.output_dir (filter state included)",
    )
    p.add_argument("--show-config", action="store_true", help="print the resolved config and exit")
    p.add_argument("--list-keys", action="store_true", help="list every config key with its help and exit")
    p.add_argument("--verl-settings", metavar="OUT",
                   help="write the recipe as verl launch settings to OUT (configs/verl/NAME.yaml; launch "
                        "with python -m tooltune.integrations.verl.launch OUT) and exit")
    p.set_defaults(func=_handle, overrides=[])


def _handle(args: argparse.Namespace) -> int:
    from tooltune.training.config import describe, load_config

    if args.list_keys:
        for key, default, help_ in describe():
            print(f"--{key} (default {default})\n    {help_}")
        return 0
    cfg = load_config(args.config, args.overrides)  # values, ranges, template and reward names
    if args.show_config:
        print(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        return 0
    if args.verl_settings:
        from tooltune.integrations.verl.launch import write_settings

        write_settings(cfg, args.config, args.verl_settings)
        print(f"tooltune train: wrote verl launch settings to {args.verl_settings}")
        return 0
    from tooltune.training.runner import shutdown_processes, train

    run_dir = train(cfg, resume=args.resume)  # checks the files, the model and the run folder first
    shutdown_processes()  # only after success: a barrier would wait forever on a rank that failed
    print(f"tooltune train: finished; run directory {run_dir}")
    print(f"  metrics: {run_dir / 'metrics.jsonl'}  model: {run_dir / 'final'}")
    print(f"  plots: tooltune report {run_dir}")
    return 0
