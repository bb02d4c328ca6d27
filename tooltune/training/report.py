"""`tooltune report RUN_DIR`: PNG plots of a training run's metrics and a short Markdown summary.

Reads `RUN_DIR/metrics.jsonl` (and `summary.json` when present) written by `tooltune train`; writes
`RUN_DIR/report/*.png` and `RUN_DIR/report/summary.md` (or `--out DIR`).

One definition per number: the training reward of a step is the mean reward of its rollouts; "first ->
last" is the mean over the first and over the last `reward_window` steps (a tenth of the run), and the
reward plot draws the raw per-step values beside the moving average over that same window, so the
summary's two numbers are the ends of the plotted average (`tooltune quickstart` prints the same).
The accuracy curve of `data.val` (metrics key `tooltune/heldout_exact_match`) is "validation exact
match" everywhere; under agentic training it is the held-out episode success
(`tooltune/heldout_episode_success`, "validation episode success"); either is drawn with its binomial
standard error on a 0-100% axis. A plot with no data is not
drawn, and a reward component identical to the total is named in the total's legend, not drawn again.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tooltune.config import prepare_output

logger = logging.getLogger(__name__)

REWARD_KEY = "reward"
VALIDATION_KEY = "tooltune/heldout_exact_match"
"""Greedy exact match on the validation rows (`data.val`), logged by `training.diagnostics.HeldOutEval`."""
EPISODE_SUCCESS_KEY = "tooltune/heldout_episode_success"
"""Greedy episode success rate on the validation tasks (agentic training), logged by `HeldOutEval`."""
VALIDATION_SAMPLES_KEY = "tooltune/heldout_samples"
"""How many validation rows each point of `VALIDATION_KEY` scored (runs before it was logged lack it)."""
VALIDATION_PART_KEYS = {
    "call": "tooltune/heldout_exact_match_call",
    "no_call": "tooltune/heldout_exact_match_no_call",
}
"""`VALIDATION_KEY` on the validation rows that expect a call and on those that expect none, logged when
both kinds are there: a policy that learns to answer `[]` everywhere gains on the second what it loses
on the first, which the aggregate can hide."""

TRL_REWARD_FUNCTION = "tooltune"
"""The name of the one reward function training gives TRL (`integrations.trl.reward.TRLRewardFunction`): its
`rewards/tooltune/mean` is the total reward by construction, so the legend does not repeat it."""

# plot file -> (title, y label, [(metric key, legend label)]); reward.png and validation.png are drawn
# by their own functions (moving average; standard errors)
PLOTS: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "reward.png": ("Training reward", "mean reward of the step's rollouts", [(REWARD_KEY, "total")]),
    "validation.png": (
        "Validation exact match or episode success (greedy, data.val)",
        "exact match or episode success (%)",
        [(VALIDATION_KEY, "validation")],
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


def reward_window(n_steps: int) -> int:
    """Steps averaged by `reward_ends` and by the moving average of the reward plots: a tenth of the
    steps, at least one. One definition, so the printed first -> last reward is what the curve shows."""
    return max(1, n_steps // 10)


def reward_ends(rewards: Sequence[float]) -> tuple[float, float, int]:
    """(first, last, window): the mean training reward over the first and over the last `window` =
    `reward_window(len(rewards))` steps (one step's reward is noisy: a few prompts of binary rewards);
    NaN without steps."""
    k = reward_window(len(rewards))
    if not rewards:
        return float("nan"), float("nan"), k
    return sum(rewards[:k]) / k, sum(rewards[-k:]) / k, k


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Means of every full run of `window` consecutive values (len(values) - window + 1 of them, the
    i-th ending at value i + window - 1): its first is `reward_ends`' first, its last the last."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        if i >= window - 1:
            out.append(total / window)
    return out


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


def _same(a: tuple[list[int], list[float]], b: tuple[list[int], list[float]]) -> bool:
    return a[0] == b[0] and all(math.isclose(x, y, abs_tol=1e-9) for x, y in zip(a[1], b[1]))


def reward_lines(records: list[dict[str, Any]]) -> tuple[str, list[tuple[str, list[int], list[float]]]]:
    """(legend label of the total, [(component, steps, values)] of the components that differ from
    the total). TRL logs the total, each reward function's mean (`rewards/<function>/mean`) and
    tooltune each weighted component's; with one component they are all the same line."""
    total = series(records, REWARD_KEY)
    keys = sorted({k for r in records for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    same, other = [], []
    for key in keys:
        pts = series(records, key)
        if not pts[0]:
            continue
        name = key.split("/")[1]
        if _same(pts, total):
            if name != TRL_REWARD_FUNCTION:
                same.append(name)
        elif not any(_same(pts, (xs, ys)) for _, xs, ys in other):
            other.append((name, *pts))
    return "total" + (f" (= {', '.join(same)})" if same else ""), other


def draw_reward(ax: Any, records: list[dict[str, Any]]) -> bool:
    """The training reward on `ax`: raw per step, its moving average over `reward_window` steps and the
    moving averages of components that differ from the total; False (nothing drawn) without rewards."""
    steps, rewards = series(records, REWARD_KEY)
    if not steps:
        return False
    first, last, k = reward_ends(rewards)
    label, components = reward_lines(records)
    ax.plot(steps, rewards, color="#4C72B0", alpha=0.35, linewidth=1, label=f"{label}, per step")
    ax.plot(steps[k - 1 :], moving_average(rewards, k), color="#4C72B0", linewidth=2.2,
            label=f"{label}, mean of the last {k} steps")
    for i, (name, xs, ys) in enumerate(components):
        w = reward_window(len(ys))
        ax.plot(xs[w - 1 :], moving_average(ys, w), linestyle="--", color=f"C{i + 1}",
                label=f"{name}, mean of the last {w} steps")
    ax.set_title(f"Training reward: {first:.3g} → {last:.3g} (mean of the first / last {k} steps)",
                 fontsize=10)
    if min(rewards) >= 0:
        ax.set_ylim(bottom=0)
    return True


def binomial_se(accuracy: float, n: int) -> float:
    """Standard error of an accuracy measured on `n` independent samples: sqrt(p(1 - p) / n)."""
    return math.sqrt(max(0.0, accuracy * (1 - accuracy)) / n) if n > 0 else float("nan")


def validation_metric(records: list[dict[str, Any]]) -> tuple[str, str]:
    """(metrics key, name) of the validation curve the records hold: exact match, or episode success
    for an agentic run."""
    if not series(records, VALIDATION_KEY)[0] and series(records, EPISODE_SUCCESS_KEY)[0]:
        return EPISODE_SUCCESS_KEY, "episode success"
    return VALIDATION_KEY, "exact match"


def draw_validation(ax: Any, records: list[dict[str, Any]], label: str = "validation") -> bool:
    """The validation curve (`validation_metric`) on `ax` in percent (0-100 axis) with ± 1 binomial
    standard error where the sample count was logged, and dashed beside it the curves on the rows
    expecting a call and on those expecting none where logged; False (nothing drawn) without points."""
    steps, acc = series(records, validation_metric(records)[0])
    if not steps:
        return False
    sizes = dict(zip(*series(records, VALIDATION_SAMPLES_KEY)))
    n = [round(sizes[s]) if s in sizes else 0 for s in steps]
    known = all(n)
    errors = [100 * binomial_se(a, m) for a, m in zip(acc, n)] if known else None
    counts = sorted(set(n))
    legend = (f"{label} ({counts[0] if len(counts) == 1 else 'varying'} samples), ± 1 standard error"
              if known else f"{label} (sample count not logged: no error bars)")
    ax.errorbar(steps, [100 * a for a in acc], yerr=errors, marker="o" if len(steps) < 40 else None,
                markersize=3, capsize=2, label=legend)
    for key, part in ((VALIDATION_PART_KEYS["call"], "rows expecting a call"),
                      (VALIDATION_PART_KEYS["no_call"], "rows expecting no call")):
        part_steps, part_acc = series(records, key)
        if part_steps:
            ax.plot(part_steps, [100 * a for a in part_acc], linestyle="--", linewidth=1,
                    label=f"{label}: {part}")
    ax.set_ylim(-3, 103)  # the whole 0-100% scale; a little room so 0% and 100% points stay visible
    return True


def plot_run(run_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Draw every plot that has data; returns the PNG paths written."""
    import matplotlib  # deferred: only plotting needs matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: only plotting needs matplotlib

    records = load_metrics(run_dir)
    special = {"reward.png": draw_reward, "validation.png": draw_validation}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (title, ylabel, lines) in PLOTS.items():
        fig, ax = plt.subplots(figsize=(6, 3.6))
        ax.set_title(title)
        if name in special:
            drew = special[name](ax, records)
        else:
            drawn = [(label, *series(records, key)) for key, label in lines]
            drawn = [d for d in drawn if d[1]]
            for label, xs, ys in drawn:
                ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=label)
            drew = bool(drawn)
        if not drew:
            plt.close(fig)
            continue
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
    """Headline numbers of a run: steps, the training reward's first -> last (`reward_ends`), the
    validation curve (`heldout`: [(step, exact match or episode success)], named by `heldout_metric`),
    time split and savings."""
    records = load_metrics(run_dir)
    grpo = [r for r in records if r.get("stage") == "grpo"]

    def total(key: str) -> float:
        return sum(series(grpo, key)[1])

    def last(key: str) -> float | None:
        ys = series(grpo, key)[1]
        return ys[-1] if ys else None

    rewards = series(grpo, REWARD_KEY)[1]
    reward_first, reward_last, window = reward_ends(rewards)
    key, metric = validation_metric(grpo)
    heldout = list(zip(*series(grpo, key), strict=True))
    out: dict[str, Any] = {
        "grpo_steps": max((r["step"] for r in grpo), default=0),
        "sft_steps": max((r["step"] for r in records if r.get("stage") == "sft"), default=0),
        "reward_first": reward_first if rewards else None,
        "reward_last": reward_last if rewards else None,
        "reward_window": window,
        "heldout": heldout,
        "heldout_metric": metric,
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
        (f"training reward (mean of the first → last {s['reward_window']} steps)",
         f"{_fmt(s['reward_first'])} → {_fmt(s['reward_last'])}"),
        (f"validation {s['heldout_metric']} (best)", _fmt(s["heldout_best"])),
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
            f"Validation {s['heldout_metric']} by step: "
            + ", ".join(f"{st}: {a:.3f}" for st, a in s["heldout"]),
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
