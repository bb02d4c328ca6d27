"""The efficiency benchmark's grid in the efficiency paper's regime (`bench/efficiency.py --grid`).

Variants (every one with the shared-prefix update on and off, at vanilla's learning rate and the same
training-time budget):

  single_turn   vanilla (n 8); filtering k = 1; filtering k = 2 (no down-sampling: the paper found it
                unhelpful single-turn)
  multi_step    vanilla n = 8; filtering k = 1 + n = 16 rollouts down-sampled to m = 8 (the paper's
                multi-turn setting)

Each run is compared with two references: vanilla with the same shared-prefix setting, and vanilla
without it (the baseline engines run), so the shared-prefix speed-up shows in the second. Speed-up =
time for the reference to reach its best held-out accuracy / time for the run to reach it
(`speedup`). `summarize` reads the per-seed JSON files into one table, per seed and mean. `speedup` and
`plot` serve the bench without --grid too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

MULTI_STEP_FILTER = {
    "filter.enabled": True,
    "filter.k": 1,
    "grpo.num_generations": 16,
    "downsample.enabled": True,
    "downsample.m": 8,
}

GRID: dict[str, dict[str, dict[str, Any]]] = {
    "single_turn": {
        "vanilla": {},
        "filter_k1": {"filter.enabled": True, "filter.k": 1},
        "filter_k2": {"filter.enabled": True, "filter.k": 2},
    },
    "multi_step": {"vanilla_n8": {}, "filter_n16_m8": MULTI_STEP_FILTER},
}
"""Part -> variant -> training-config overrides (beyond the preset)."""

VANILLA = {"single_turn": "vanilla", "multi_step": "vanilla_n8"}
SP = {True: "sp", False: "no_sp"}
ZERO_VARIANCE_KEY = "tooltune/zero_variance_share"
ALL_CORRECT_KEY = "tooltune/all_correct_share"
SKIPPED_KEY = "tooltune/prompts_skipped_epoch"
REFERENCES = ("same_sp", "vs_baseline", "same_sp_cpu", "vs_baseline_cpu")
"""Speed-ups of a run: against vanilla with its shared-prefix setting or vanilla without it; wall or CPU."""


def run_key(variant: str, shared: bool) -> str:
    return f"{variant}+{SP[shared]}"


def grid_runs(part: str) -> list[tuple[str, dict[str, Any]]]:
    """(run key, overrides) of one part: each variant with the shared-prefix update off, then on."""
    return [
        (run_key(name, shared), {**knobs, "grpo.shared_prefix": shared})
        for name, knobs in GRID[part].items()
        for shared in (False, True)
    ]


def time_to_reach(curve: list[dict[str, Any]], target: float) -> float | None:
    """First training time at which the curve's accuracy is >= target (None if never)."""
    for point in curve:
        if point["accuracy"] >= target - 1e-12:
            return point["train_s"]
    return None


def speedup(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Time for (a) to reach its best accuracy divided by the time for (b) to reach the same accuracy.

    The first point of a curve is the warm start (its training time is the set-up, near 0): no ratio
    when (a)'s best is there (it never improved; `time_a_s` is then 0) or when (b) never got there."""
    best = max(p["accuracy"] for p in a)
    t_a, t_b = time_to_reach(a, best), time_to_reach(b, best)
    if t_a == a[0]["train_s"]:
        t_a = 0
    ratio = (t_a / t_b if t_b != b[0]["train_s"] else math.inf) if t_b is not None and t_a else None
    return {"target_accuracy": best, "time_a_s": t_a, "time_b_s": t_b, "speedup": ratio}


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return sum(values) / len(values) if values else None


def cpu_curve(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The held-out curve against the process's CPU time (`train_cpu_s` of the step record) instead of
    wall time: on shared cores, where other jobs stretch wall time, CPU time counts only this run's work."""
    cpu = {r["step"]: r["train_cpu_s"] for r in run.get("log", []) if "train_cpu_s" in r}
    return [{**p, "train_s": cpu.get(p["step"], 0.0 if p["step"] == 0 else None)} for p in run["curve"]
            if p["step"] == 0 or p["step"] in cpu]


def run_row(run: dict[str, Any], same: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """One run's figures: against vanilla with the same shared-prefix setting (`same`) and against vanilla
    without it (`base`), on training wall time and (`*_cpu`) on CPU time."""
    curve = run["curve"]
    total = run["rollout_s"] + run["update_s"]
    return {
        "steps": run["steps"],
        "start": curve[0]["accuracy"],
        "best": max(p["accuracy"] for p in curve),
        "end": curve[-1]["accuracy"],
        "train_s": run["train_wall_s"],
        "rollout_s": run["rollout_s"],
        "update_s": run["update_s"],
        "update_share": run["update_s"] / total if total else None,
        "step_s": run["train_wall_s"] / run["steps"] if run["steps"] else None,
        "zero_variance": _mean([r.get(ZERO_VARIANCE_KEY) for r in run.get("log", [])]),
        "all_correct": _mean([r.get(ALL_CORRECT_KEY) for r in run.get("log", [])]),
        "skipped_max": max((r[SKIPPED_KEY] for r in run.get("log", []) if SKIPPED_KEY in r), default=0),
        "same_sp": speedup(same["curve"], curve),
        "vs_baseline": speedup(base["curve"], curve),
        "train_cpu_s": run.get("train_cpu_s"),
        "same_sp_cpu": speedup(cpu_curve(same), cpu_curve(run)),
        "vs_baseline_cpu": speedup(cpu_curve(base), cpu_curve(run)),
    }


def compare_part(part: str, runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Run key -> `run_row` for every run of a part whose two references (vanilla with the run's
    shared-prefix setting, vanilla without it) were run too."""
    vanilla = VANILLA[part]
    base = runs.get(run_key(vanilla, False))
    out = {}
    for key, run in runs.items():
        same = runs.get(run_key(vanilla, key.endswith("+" + SP[True])))
        if base is not None and same is not None:
            out[key] = run_row(run, same, base)
    return out


def load_results(paths: list[str]) -> dict[str, dict[int, dict[str, Any]]]:
    """Part -> seed -> that seed's runs (run key -> grpo_summary), merged over the grid JSON files."""
    out: dict[str, dict[int, dict[str, Any]]] = {part: {} for part in GRID}
    for path in paths:
        data = json.loads(Path(path).read_text())
        for part, runs in data["parts"].items():
            out[part].setdefault(int(data["seed"]), {}).update(runs["runs"])
    return {part: seeds for part, seeds in out.items() if seeds}


def _fmt_ratio(s: dict[str, Any]) -> str:
    if not s["time_a_s"]:
        return "n/a"
    return "never" if s["speedup"] is None else f"{s['speedup']:.2f}×"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _share(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def summarize(results: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Per part: per seed and run key the `run_row`, and over seeds the means (speed-ups: mean over the
    seeds where the target was reached, with the count)."""
    summary: dict[str, Any] = {}
    for part, seeds in results.items():
        rows = {seed: compare_part(part, runs) for seed, runs in sorted(seeds.items())}
        keys = [k for k, _ in grid_runs(part) if all(k in r for r in rows.values())]
        mean: dict[str, Any] = {}
        for key in keys:
            per = [r[key] for r in rows.values()]
            m = {f: _mean([p[f] for p in per]) for f in (
                "steps", "start", "best", "end", "train_s", "train_cpu_s", "rollout_s", "update_s",
                "update_share", "step_s", "zero_variance", "all_correct", "skipped_max")}
            for ref in REFERENCES:
                got = [p[ref] for p in per if p[ref]["time_a_s"]]
                m[ref] = {
                    "speedup": _mean([s["speedup"] for s in got if s["speedup"] not in (None, math.inf)]),
                    "reached": sum(s["speedup"] is not None for s in got),
                    "of": len(got),
                    "time_b_s": _mean([s["time_b_s"] for s in got]),
                }
            mean[key] = m
        summary[part] = {"seeds": rows, "mean": mean}
    return summary


def table(summary: dict[str, Any]) -> str:
    """Markdown: per part, one row per seed and run, then the means over seeds."""
    lines = []
    heads = "speed-up (same sp) | speed-up vs vanilla no_sp | CPU-time speed-up vs vanilla no_sp"
    for part, s in summary.items():
        lines += [
            f"\n{part}: per seed (accuracy in %; speed-up at the reference vanilla's best; "
            "sp = shared-prefix update)\n",
            "| seed | run | steps | start | best | end | s / step | rollout s | update s | update share "
            f"| zero-var. share (all correct) | skipped | time to ref. best (same sp) | {heads} |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for seed, rows in s["seeds"].items():
            for key, r in rows.items():
                t = r["same_sp"]["time_b_s"] if r["same_sp"]["time_a_s"] else None
                lines.append(
                    f"| {seed} | {key} | {r['steps']} | {_pct(r['start'])} | {_pct(r['best'])} | "
                    f"{_pct(r['end'])} | {r['step_s']:.2f} | {r['rollout_s']:.0f} | {r['update_s']:.0f} | "
                    f"{_share(r['update_share'])} | "
                    f"{_share(r['zero_variance'])} ({_share(r['all_correct'])}) | "
                    f"{r['skipped_max']:.0f} | {'–' if t is None else f'{t:.0f} s'} | "
                    f"{_fmt_ratio(r['same_sp'])} | {_fmt_ratio(r['vs_baseline'])} | "
                    f"{_fmt_ratio(r['vs_baseline_cpu'])} |"
                )
        lines += [
            f"\n{part}: mean over seeds (speed-up: mean over the seeds that reached the target; "
            "k/n reached)\n",
            "| run | steps | best | end | s / step | rollout s | update s | update share "
            f"| zero-var. share (all correct) | {heads} |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for key, m in s["mean"].items():
            ratios = []
            for ref in ("same_sp", "vs_baseline", "vs_baseline_cpu"):
                x = m[ref]
                value = "–" if x["speedup"] is None else f"{x['speedup']:.2f}×"
                ratios.append(f"{value} ({x['reached']}/{x['of']})")
            lines.append(
                f"| {key} | {m['steps']:.1f} | {_pct(m['best'])} | {_pct(m['end'])} | {m['step_s']:.2f} | "
                f"{m['rollout_s']:.0f} | {m['update_s']:.0f} | {_share(m['update_share'])} | "
                f"{_share(m['zero_variance'])} ({_share(m['all_correct'])}) | {' | '.join(ratios)} |"
            )
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path, title: str) -> None:
    """Held-out accuracy vs training time, one curve per variant (the bench without --grid)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, r in results.items():
        curve = r["curve"]
        ax.plot([p["train_s"] for p in curve], [p["accuracy"] for p in curve], marker="o", ms=3, label=name)
    ax.set_xlabel("training wall time (s, evaluation excluded)")
    ax.set_ylabel("held-out exact match")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_grid(results: dict[str, dict[int, dict[str, Any]]], path: Path) -> None:
    """Held-out accuracy vs training time: one panel per part and seed, one curve per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = list(results)
    seeds = sorted({s for p in parts for s in results[p]})
    size = (4.2 * len(seeds), 3.2 * len(parts))
    fig, axes = plt.subplots(len(parts), len(seeds), figsize=size, squeeze=False)
    for i, part in enumerate(parts):
        for j, seed in enumerate(seeds):
            ax = axes[i][j]
            for key, run in results[part].get(seed, {}).items():
                curve = run["curve"]
                style = "-" if key.endswith("+" + SP[True]) else "--"
                ax.plot([p["train_s"] for p in curve], [p["accuracy"] for p in curve], style, marker="o",
                        ms=2.5, label=key)
            ax.set_title(f"{part}, seed {seed}", fontsize=9)
            ax.set_xlabel("training time (s, evaluation excluded)", fontsize=8)
            ax.set_ylabel("held-out exact match", fontsize=8)
            ax.tick_params(labelsize=7)
        axes[i][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
