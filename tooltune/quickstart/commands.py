"""CLI: `tooltune quickstart [--out DIR] [--seed N] [--budget default|mini] [--set key=value ...]`."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "quickstart",
        help="train a tiny model to call tools on CPU: SFT warm start, then GRPO; writes a report",
        description="Offline CPU demo (measured times: docs/quickstart.md): build a tiny model, generate the "
        "synthetic task, SFT warm start, GRPO with the binary reward, evaluate, write DIR/report.{json,md} "
        "and PNGs. "
        "Running it again on the same DIR resumes from the last finished stage.",
    )
    p.add_argument("--out", default="runs/quickstart", help="run directory (default: runs/quickstart)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--budget", default="default", help="size preset: default (the demo) or mini (smoke test)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one QuickstartConfig field, e.g. --set grpo_steps=50 (repeatable)",
    )
    p.add_argument("--stop-after", default=None, help="stop after this stage (resume later)")
    p.set_defaults(func=_handle)


def _parse_sets(items: list[str]) -> dict[str, Any]:
    import json

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _handle(args: argparse.Namespace) -> int:
    import logging

    from tooltune.quickstart.run import STAGES, Pipeline, make_config

    logging.basicConfig(level=logging.WARNING)
    if args.stop_after and args.stop_after not in STAGES:
        raise SystemExit(f"--stop-after {args.stop_after!r}: choose one of {', '.join(STAGES)}")
    try:
        cfg = make_config(args.budget, seed=args.seed, **_parse_sets(args.set))
        pipe = Pipeline(args.out, cfg)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    print(f"tooltune quickstart: seed {cfg.seed}, budget {args.budget}, output {args.out}")
    report = pipe.run(stop_after=args.stop_after)
    print()
    print((pipe.out / "report.md").read_text().split("\nTimings")[0])
    print(
        f"report: {pipe.out / 'report.json'}, {pipe.out / 'report.md'}; plots: {', '.join(report['plots'])}"
    )
    return 0
