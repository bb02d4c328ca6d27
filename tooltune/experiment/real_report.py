"""DIR/report.json and DIR/report.md of the `real` profile (from whatever stages finished).

Scores are the official scorers' on the fixed subsets, each with its standard error over entries; the
checkpoints are compared on the same entries with paired differences (`evaluation.uncertainty`): SFT
vs the untrained model, GRPO vs SFT, continued SFT vs SFT, and GRPO vs continued SFT (RL against SFT at
equal training time, the papers' claim). The unseen-tools split (tool domains never offered in training)
is scored by greedy exact match with a binomial SE and paired differences (`experiment.stats`). The phase
table gives the seconds of every phase: data, model load, SFT, GRPO split into rollout and update,
continued SFT, and each benchmark of each evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tooltune.evaluation.benchmark import BENCHMARKS
from tooltune.evaluation.uncertainty import paired_differences, read_verdicts
from tooltune.experiment.report import environment, note_lines
from tooltune.experiment.stats import paired

CHECKPOINT_STAGES = {"base": "eval_base", "sft": "eval_sft", "grpo": "eval_grpo",
                     "sft_continued": "eval_sft_continued"}
"""Checkpoint -> the stage that evaluated it."""

COMPARISONS = (("sft", "base", "SFT warm start vs untrained"), ("grpo", "sft", "GRPO vs its SFT start"),
               ("sft_continued", "sft", "continued SFT vs its SFT start"),
               ("grpo", "sft_continued", "GRPO vs continued SFT at equal training time"))
"""(B, A, what B - A measures) for every paired comparison of the report."""

GRPO_KEYS = ("steps", "reward_first", "reward_last", "rollouts_generated", "rollout_s", "update_s")


def _keys(config: dict[str, Any], bench: str, scores: dict[str, float], categories: bool = True) -> list[str]:
    """The benchmark's headline keys (`benchmarks.headline`) that it scored, then (with `categories`, or
    when none of them was scored) every category's accuracy."""
    listed = [k.strip() for k in str(config["benchmarks"]["headline"].get(bench, "")).split(",") if k.strip()]
    found = [k for k in listed if k in scores]
    if found and not categories:
        return found
    accuracies = sorted(k for k in scores if k.startswith("categories.") and k.endswith(".accuracy"))
    return found + [k for k in accuracies if k not in found]


def _scores(config: dict[str, Any], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """checkpoint -> benchmark -> key -> {value, se} for the headline keys and every category."""
    out: dict[str, Any] = {}
    for ckpt, stage in CHECKPOINT_STAGES.items():
        if stage not in results:
            continue
        out[ckpt] = {}
        for bench, r in results[stage]["benchmarks"].items():
            out[ckpt][bench] = {k: {"value": r["scores"][k], "se": r["standard_errors"].get(k)}
                                for k in _keys(config, bench, r["scores"])}
    return out


def compare_checkpoints(config: dict[str, Any], after: dict[str, Any], before: dict[str, Any]
                        ) -> list[dict[str, Any]]:
    """Paired differences `after` − `before` of two checkpoints' evaluation results (an `eval_*` stage's
    result: its benchmarks and unseen-tools split) on the entries both scored: one row per benchmark the
    two share (its headline keys, `uncertainty.paired_differences`) and one for the unseen-tools split
    (`stats.paired` over its per-sample hits), each {benchmark, units, scores: key -> {delta, se, z}}."""
    rows = []
    for bench, rb in after["benchmarks"].items():
        if bench not in before["benchmarks"]:
            continue
        diff = paired_differences(BENCHMARKS[bench], read_verdicts(before["benchmarks"][bench]["run"]),
                                  read_verdicts(rb["run"]))
        keys = _keys(config, bench, rb["scores"], categories=False)
        rows.append({"benchmark": bench, "units": diff["units"],
                     "scores": {k: diff["scores"][k] for k in keys if k in diff["scores"]}})
    unseen = paired(after["unseen_tools"]["hits"], before["unseen_tools"]["hits"])
    rows.append({"benchmark": "unseen_tools", "units": len(after["unseen_tools"]["hits"]),
                 "scores": {"accuracy": {"delta": unseen["diff"], "se": unseen["se"], "z": unseen["z"]}}})
    return rows


def _paired(config: dict[str, Any], results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for b, a, what in COMPARISONS:
        sb, sa = results.get(CHECKPOINT_STAGES[b]), results.get(CHECKPOINT_STAGES[a])
        if sb is not None and sa is not None:
            rows += [{"b": b, "a": a, "what": what, **row} for row in compare_checkpoints(config, sb, sa)]
    return rows


def phases(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Seconds of each phase (wall and CPU where measured) and its peak resident memory (MB, where
    measured: `tooltune.experiment.memory`), in pipeline order."""
    rows: list[dict[str, Any]] = []

    def add(phase: str, wall: float | None, cpu: float | None = None, peak: float | None = None) -> None:
        rows.append({"phase": phase, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak})

    for stage, res in results.items():
        t = res.get("timing", {})
        if stage == "model":
            add("model load", res.get("load_s"), None, t.get("peak_rss_mb"))
        elif stage == "grpo":
            add("GRPO (stage)", t.get("wall_s"), t.get("cpu_s"), t.get("peak_rss_mb"))
            add("  GRPO rollout", res.get("rollout_s"))
            add("  GRPO update", res.get("update_s"))
        elif stage.startswith("eval_"):
            for bench, r in res["benchmarks"].items():
                bt = r["timing"]
                add(f"{stage}: {bench} ({r['entries']} entries)", bt["wall_s"], bt["cpu_s"],
                    bt.get("peak_rss_mb"))
            split = res.get("splits_timing", {})
            add(f"{stage}: unseen tools", split.get("wall_s"), None, split.get("peak_rss_mb"))
        else:
            add(stage, t.get("wall_s"), t.get("cpu_s"), t.get("peak_rss_mb"))
    return rows


def build_real(config: dict[str, Any], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The report's content from the settings and the finished stages' results."""
    unseen = {c: {k: v for k, v in results[s]["unseen_tools"].items() if k in ("accuracy", "se", "n")}
              for c, s in CHECKPOINT_STAGES.items() if s in results}
    subsets = {bench: r.get("subset") for s in CHECKPOINT_STAGES.values() if s in results
               for bench, r in results[s]["benchmarks"].items()}
    return {
        "profile": "real", "seed": config["seed"], "model": config["model"],
        "template": {"train": config["train"]["data"]["template"],
                     "evaluation": config["benchmarks"]["template"] or config["train"]["data"]["template"]},
        "data": results.get("data"), "subsets": subsets, "scores": _scores(config, results),
        "unseen_tools": unseen, "paired": _paired(config, results), "phases": phases(results),
        "grpo": {k: results["grpo"].get(k) for k in GRPO_KEYS} if "grpo" in results else None,
        "sft_targets": results.get("sft", {}).get("target_tokens"), "screen": results.get("screen"),
        "environment": environment(), "plots": [],
        "timings": {"stages_wall_s": sum(r.get("timing", {}).get("wall_s", 0.0) for r in results.values()),
                    "stages_cpu_s": sum(r.get("timing", {}).get("cpu_s", 0.0) for r in results.values())},
    }


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _variants(screen: dict[str, Any]) -> str:
    n = screen.get("irrelevance_variants")
    return (f" and {n} irrelevance variants of them (called tools removed, no call expected: "
            "`screen.irrelevance_variants`)") if n else ""


def _md(r: dict[str, Any]) -> str:
    lines = [f"# Quickstart (real model): {r['model']}", "",
             f"Seed {r['seed']}; training template {r['template']['train']}, evaluation template "
             f"{r['template']['evaluation']}; greedy evaluation, official scoring.", "", *note_lines(r)]
    if r["data"]:
        sizes = ", ".join(f"{k} {v}" for k, v in r["data"]["sizes"].items())
        lines += [f"Data: {sizes} ({r['data']['prepared']} prepared samples, {r['data']['domains']} tool "
                  "domains; unseen_tools = domains no training sample offers).", ""]
        decontamination = r["data"].get("decontamination")
        if decontamination:
            rejected = ", ".join(f"{b} {n}" for b, n in decontamination["samples_rejected"].items())
            lines += [f"Decontamination (user turns copied from a benchmark), dropped: {rejected}.", ""]
    lengths = r.get("sft_targets")
    if lengths and lengths.get("n"):
        over = ", ".join(f"{share:.0%} longer than {name}" for name, share in lengths["over"].items())
        lines += [f"SFT targets: {lengths['median']} tokens median, {lengths['p90']} p90, "
                  f"{lengths['max']} max; {over}.", ""]
    screen = r.get("screen")
    if screen and screen["enabled"]:
        lines += [f"GRPO's prompts, screened by the warm start ({screen['k']} answers each at temperature "
                  f"{screen['temperature']}, binary reward): of {screen['in']}, {screen['all_wrong']} never "
                  f"solved and {screen['all_right']} always solved were set aside; GRPO trained on the "
                  f"{screen['mixed']} mixed ones{_variants(screen)}.", ""]
    for bench, subset in r["subsets"].items():
        if subset:
            how = subset.get("per_category", "listed")
            lines.append(f"- {bench}: {subset['entries']} entries, at most {how} per category, seed "
                         f"{subset.get('seed', '-')}")
    ckpts = list(r["scores"])
    lines += ["", "## Scores (%, ± SE over entries)", "", "| benchmark | score | " + " | ".join(ckpts) + " |",
              "|---|---|" + "---|" * len(ckpts)]
    benches = {b: list(keys) for c in ckpts for b, keys in r["scores"][c].items()}
    for bench, keys in benches.items():
        for key in keys:
            cells = []
            for c in ckpts:
                v = r["scores"][c].get(bench, {}).get(key)
                cells.append("–" if v is None else f"{_pct(v['value'])} ± {_pct(v['se'])}")
            lines.append(f"| {bench} | {key} | " + " | ".join(cells) + " |")
    unseen = [r["unseen_tools"].get(c) for c in ckpts]
    cells = ["–" if u is None else f"{_pct(u['accuracy'])} ± {_pct(u['se'])}" for u in unseen]
    lines.append("| unseen tools | greedy exact match | " + " | ".join(cells) + " |")
    lines += ["", "## Paired differences (B − A on the same entries, points)", "",
              "| comparison | benchmark | score | B − A | SE | z |", "|---|---|---|---|---|---|"]
    for row in r["paired"]:
        for key, d in row["scores"].items():
            z = "–" if d.get("z") is None else f"{d['z']:+.2f}"
            lines.append(f"| {row['what']} | {row['benchmark']} | {key} | {100 * d['delta']:+.1f} | "
                         f"{_pct(d.get('se'))} | {z} |")
    if r["plots"]:
        lines += ["", *(f"![{name}]({name})" for name in r["plots"])]
    lines += ["", "Timings", "", "| phase | wall (s) | CPU (s) | peak memory (MB) |", "|---|---|---|---|"]
    for p in r["phases"]:
        wall, cpu, peak = ("–" if p.get(k) is None else f"{p[k]:.0f}"
                           for k in ("wall_s", "cpu_s", "peak_rss_mb"))
        lines.append(f"| {p['phase']} | {wall} | {cpu} | {peak} |")
    return "\n".join(lines) + "\n"


def checkpoints_plot(out: Path, results: dict[str, dict[str, Any]], report: dict[str, Any]) -> list[str]:
    """checkpoints.png: each benchmark's headline score (the key its evaluation stage chose) and unseen
    tools per checkpoint, ± SE bars."""
    scores = report["scores"]
    ckpts = list(scores)
    if not ckpts:
        return []
    headline = {bench: r["headline_key"] for c in ckpts
                for bench, r in results[CHECKPOINT_STAGES[c]]["benchmarks"].items() if r.get("headline_key")}
    panels = [(f"{bench}\n{key}", [scores[c].get(bench, {}).get(key) for c in ckpts])
              for bench, key in headline.items()]
    unseen = report["unseen_tools"]
    panels.append(("unseen tools\ngreedy exact match",
                   [{"value": unseen[c]["accuracy"], "se": unseen[c]["se"]} if c in unseen else None
                    for c in ckpts]))
    import matplotlib  # deferred: heavy

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: heavy

    fig, axes = plt.subplots(1, len(panels), figsize=(2.4 * len(panels), 3.0), squeeze=False)
    for ax, (title, cells) in zip(axes[0], panels):
        xs = [i for i, c in enumerate(cells) if c]
        ax.bar(xs, [100 * cells[i]["value"] for i in xs], yerr=[100 * (cells[i]["se"] or 0.0) for i in xs],
               capsize=3, color="#4c72b0")
        ax.set_xticks(range(len(ckpts)), ckpts, rotation=30, fontsize=7)
        ax.set_ylim(0, max(5.0, ax.get_ylim()[1]))  # a floor of 0 and room to see a score near zero
        ax.set_title(title, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("% (± SE over entries)")
    fig.tight_layout()
    fig.savefig(out / "checkpoints.png", dpi=90)
    plt.close(fig)
    return ["checkpoints.png"]


def write_real_report(out: str | Path, config: dict[str, Any], results: dict[str, dict[str, Any]],
                      notes: Sequence[str] = ()) -> dict[str, Any]:
    """Write out/report.json, out/report.md and out/checkpoints.png; returns the report. `notes`: lines
    stated under the title (e.g. what a branched run shares with its source)."""
    out = Path(out)
    r = {**build_real(config, results), "notes": list(notes)}
    r["plots"] = checkpoints_plot(out, results, r)
    (out / "report.json").write_text(json.dumps(r, indent=1))
    (out / "report.md").write_text(_md(r))
    return r
