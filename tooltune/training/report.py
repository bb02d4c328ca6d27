"""`tooltune report RUN_DIR`: PNG plots of a training run's metrics and a short Markdown summary.

Reads `RUN_DIR/metrics.jsonl` (and `summary.json` when present) written by `tooltune train`; writes
`RUN_DIR/report/*.png` and `RUN_DIR/report/summary.md` (or `--out DIR`).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path
from typing import Any

from tooltune.config import prepare_output

logger = logging.getLogger(__name__)

# plot file -> (title, y label, [(metric key, legend label)])
PLOTS: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "reward.png": ("Training reward", "reward", [("reward", "total")]),
    "heldout.png": (
        "Held-out exact match (greedy)",
        "accuracy",
        [("tooltune/heldout_exact_match", "exact match")],
    ),
    "groups.png": (
        "Prompt groups without learning signal",
        "share of prompts",
        [
            ("tooltune/zero_variance_share", "zero variance"),
            ("tooltune/all_correct_share", "all correct"),
            ("tooltune/all_wrong_share", "all wrong"),
        ],
    ),
    "time.png": (
        "Wall time per optimizer step",
        "seconds",
        [
            ("tooltune/rollout_time", "rollout (generation + scoring)"),
            ("tooltune/update_time", "policy update"),
        ],
    ),
    "entropy.png": (
        "Token entropy",
        "nats",
        [
            ("tooltune/entropy_reasoning", "reasoning tokens"),
            ("tooltune/entropy_tool_call", "tool-call tokens"),
            ("entropy", "all tokens"),
        ],
    ),
    "length.png": ("Completion length", "tokens", [("completions/mean_length", "mean")]),
    "savings.png": (
        "Work saved",
        "per step",
        [
            ("tooltune/rollouts_saved_epoch", "rollouts saved by filtering"),
            ("tooltune/rollouts_dropped", "rollouts dropped by down-sampling"),
        ],
    ),
    "loss.png": ("Loss", "loss", [("loss", "grpo"), ("sft_loss", "sft")]),
}


class MetricsError(ValueError):
    """A run's metrics.jsonl is missing or holds no metrics record; the message names the file."""


def load_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of RUN_DIR/metrics.jsonl (JSON objects with a "step"). Unreadable lines (a line torn
    by a kill, foreign bytes) are skipped and counted in a warning; a file with no record at all is a
    MetricsError, so a report is never drawn from garbage."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise MetricsError(f"{path}: no metrics (is {run_dir} a `tooltune train` run directory?)")
    records, bad, first_bad = [], 0, None
    for lineno, raw in enumerate(path.read_bytes().splitlines(), 1):
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            rec = None
        if not isinstance(rec, dict) or not isinstance(rec.get("step"), (int, float)):
            bad += 1
            first_bad = first_bad or lineno
            continue
        if rec.get("stage") == "sft" and "loss" in rec:
            rec = dict(rec, sft_loss=rec.pop("loss"))
        records.append(rec)
    if not records:
        raise MetricsError(
            f"{path}: no metrics record in {bad} line(s) (expected one JSON object with a 'step' per line; "
            f"line {first_bad} is not one)" if bad else f"{path}: empty"
        )
    if bad:
        logger.warning("%s: skipped %d unreadable line(s), the first at line %d", path, bad, first_bad)
    return records


def series(records: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    pts = [
        (r["step"], float(r[key]))
        for r in records
        if isinstance(r.get(key), (int, float)) and math.isfinite(float(r[key]))
    ]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_run(run_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Draw every plot that has data; returns the PNG paths written."""
    import matplotlib  # deferred: only plotting needs matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: only plotting needs matplotlib

    records = load_metrics(run_dir)
    reward_keys = sorted(
        {k for r in records for k in r if k.startswith("rewards/") and k.endswith("/mean") and k != "reward"}
    )
    plots = dict(PLOTS)
    title, ylabel, lines = plots["reward.png"]
    plots["reward.png"] = (title, ylabel, lines + [(k, k.split("/")[1]) for k in reward_keys])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (title, ylabel, lines) in plots.items():
        drawn = [(label, *series(records, key)) for key, label in lines]
        drawn = [d for d in drawn if d[1]]
        if not drawn:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for label, xs, ys in drawn:
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=label)
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        written.append(out / name)
    return written


def summarize(run_dir: str | Path) -> dict[str, Any]:
    """Headline numbers of a run: steps, rewards, held-out accuracy, time split and savings."""
    records = load_metrics(run_dir)
    grpo = [r for r in records if r.get("stage") == "grpo"]

    def total(key: str) -> float:
        return sum(series(grpo, key)[1])

    def last(key: str) -> float | None:
        ys = series(grpo, key)[1]
        return ys[-1] if ys else None

    rewards = series(grpo, "reward")[1]
    heldout = list(zip(*series(grpo, "tooltune/heldout_exact_match"), strict=True))
    out: dict[str, Any] = {
        "grpo_steps": max((r["step"] for r in grpo), default=0),
        "sft_steps": max((r["step"] for r in records if r.get("stage") == "sft"), default=0),
        "reward_first": rewards[0] if rewards else None,
        "reward_last": rewards[-1] if rewards else None,
        "heldout": heldout,
        "heldout_best": max((a for _, a in heldout), default=None),
        "rollout_seconds": total("tooltune/rollout_time"),
        "update_seconds": total("tooltune/update_time"),
        "rollouts_generated": total("tooltune/rollouts_generated"),
        "rollouts_dropped": total("tooltune/rollouts_dropped"),
        "tokens_saved": total("tooltune/tokens_saved"),
        "tokens_trained": total("tooltune/tokens_trained"),
        "prompts_skipped_last_epoch": last("tooltune/prompts_skipped_epoch"),
        "zero_variance_share_mean": _mean(series(grpo, "tooltune/zero_variance_share")[1]),
    }
    summary = Path(run_dir) / "summary.json"
    if summary.is_file():
        out["run"] = json.loads(summary.read_text(encoding="utf-8"))
    return out


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def write_markdown(run_dir: str | Path, out_dir: str | Path, plots: list[Path]) -> Path:
    s = summarize(run_dir)
    rows = [
        ("GRPO steps", s["grpo_steps"]),
        ("SFT steps", s["sft_steps"]),
        ("reward (first → last step)", f"{_fmt(s['reward_first'])} → {_fmt(s['reward_last'])}"),
        ("held-out exact match (best)", _fmt(s["heldout_best"])),
        ("mean zero-variance share", _fmt(s["zero_variance_share_mean"])),
        ("rollout time / update time (s)", f"{_fmt(s['rollout_seconds'])} / {_fmt(s['update_seconds'])}"),
        ("rollouts generated / dropped", f"{_fmt(s['rollouts_generated'])} / {_fmt(s['rollouts_dropped'])}"),
        ("tokens trained / saved", f"{_fmt(s['tokens_trained'])} / {_fmt(s['tokens_saved'])}"),
        ("prompts skipped (last epoch)", _fmt(s["prompts_skipped_last_epoch"])),
    ]
    lines = [f"# Training report: {Path(run_dir).name}", "", "| metric | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    if s["heldout"]:
        lines += [
            "",
            "Held-out exact match by step: " + ", ".join(f"{st}: {a:.3f}" for st, a in s["heldout"]),
        ]
    lines += [""] + [f"![{p.stem}]({p.name})" for p in plots]
    path = Path(out_dir) / "summary.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def register(subparsers: Any) -> None:
    """Add `tooltune report RUN_DIR [--out DIR]`."""
    p = subparsers.add_parser(
        "report", help="Plot a training run's metrics (PNG) and write a Markdown summary."
    )
    p.add_argument("run_dir", help="a `tooltune train` run directory (holds metrics.jsonl)")
    p.add_argument("--out", help="output folder (default RUN_DIR/report)")
    p.set_defaults(func=_handle)


def _handle(args: argparse.Namespace) -> int:
    load_metrics(args.run_dir)  # a MetricsError names the file before anything is written
    out = prepare_output(args.out or Path(args.run_dir) / "report", "--out", folder=True)
    plots = plot_run(args.run_dir, out)
    md = write_markdown(args.run_dir, out, plots)
    print(md.read_text(encoding="utf-8"))
    print(f"tooltune report: {len(plots)} plots and {md} written to {out}")
    return 0
