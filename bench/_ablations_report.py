"""The reward-ablation benchmark's variants, statistics, table, verdicts and plot (`bench/ablations.py`).

Statistics. Every checkpoint is evaluated on the same samples, and every variant runs the same GRPO
seeds from the same warm start, so a variant is compared with the binary reward pairwise: per sample
i and seed s, d_si = hit(variant, s, i) - hit(binary, s, i). The difference is the mean of d_si. Two
standard errors are reported: over samples (sd of the seed-averaged d_i / sqrt(n): how much another
draw of evaluation samples would move it) and over seeds (sd of the per-seed mean differences /
sqrt(seeds): how much another training run would move it). A verdict uses the larger of the two:
z = difference / max(se_samples, se_seeds); z beyond 2 in the paper's direction is "reproduced", in
the other direction "not reproduced (reversed)", otherwise "inconclusive"; with one seed a verdict is
always "inconclusive" (the spread between seeds is not measured). ACE differences are
paired the same way on the per-sample CER values.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tooltune.evaluation.r2if_ace import ace_statistics

PROFILES = {
    "quickstart": "quickstart.yaml",
    "paper": "quickstart_efficiency_paper.yaml",
    "mini": "quickstart_mini.yaml",
}
"""Profile -> quickstart config (the task, model and GRPO settings every variant shares)."""

VARIANTS: dict[str, dict[str, Any]] = {
    "binary": {"reward": {"components": {"binary": 1.0}}, "label": "binary (Tool-N1)"},
    "fine_grained": {
        "reward": {"components": {"fine_grained": 1.0, "binary": 0.0, "format": 0.0}},
        "label": "fine-grained (Tool-N1 Table 3)",
    },
    "no_format": {
        "reward": {"components": {"correctness": 1.0, "format": 0.0}},
        "label": "binary without the reasoning format",
    },
    "r2if": {
        "reward": {"components": {"binary": 3.0, "cer": 1.0, "smv": 1.0}},
        "label": "R2IF 3·binary + CER + SMV",
    },
}
"""Variant -> its reward (training config `reward` fields; weight 0 = logged only) and label."""

PAPER = {
    "binary": "84.82",
    "fine_grained": "83.74 / 82.58",
    "no_format": "81.94",
    "r2if": "ACE up with CER",
}
"""The papers' numbers beside ours: Tool-N1 Table 3 (BFCL overall accuracy, %, the paper's two
fine-grained variants), and R2IF's claim about ACE."""

CLAIMS = (
    ("Tool-N1 Table 3: binary beats fine-grained", "fine_grained", "heldout_calls", -1,
     "84.82 vs 83.74 / 82.58"),
    ("Tool-N1 Table 3: binary beats binary without the reasoning format", "no_format", "heldout_calls", -1,
     "84.82 vs 81.94"),
    ("R2IF: CER in the reward raises ACE", "r2if", "ace", +1, "ACE higher with CER than without"),
)
"""(claim, variant compared with binary, metric, the sign the paper reports for variant - binary, paper)."""

METRICS = ("heldout_exact", "heldout_calls", "unseen_tools_exact", "unseen_tools_calls", "ace")


ace_summary = ace_statistics
"""ACE (mean R_cer), its standard error and n (`tooltune.evaluation.r2if_ace.ace_statistics`)."""


def per_sample(result: dict[str, Any], metric: str) -> list[float]:
    """A run's per-sample values of `metric` (hits, or R_cer for "ace")."""
    ev = result["eval"]
    return ev["ace"]["values"] if metric == "ace" else ev[metric]["hits"]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _sd(xs: list[float]) -> float:
    if len(xs) < 2:
        return float("nan")
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def paired(a: dict[int, list[float]], b: dict[int, list[float]]) -> dict[str, Any]:
    """a - b over the seeds both have (seed -> per-sample values): difference, se over samples, se
    over seeds, z with the larger of the two (module docstring)."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return {"diff": float("nan"), "se_samples": float("nan"), "se_seeds": float("nan"), "z": float("nan"),
                "seeds": 0}
    n = len(a[seeds[0]])
    d = [_mean([a[s][i] - b[s][i] for s in seeds]) for i in range(n)]
    per_seed = [_mean([x - y for x, y in zip(a[s], b[s], strict=True)]) for s in seeds]
    diff = _mean(d)
    se_samples = _sd(d) / math.sqrt(n) if n > 1 else float("nan")
    se_seeds = _sd(per_seed) / math.sqrt(len(seeds)) if len(seeds) > 1 else float("nan")
    se = max(x for x in (se_samples, se_seeds) if not math.isnan(x)) if n > 1 else float("nan")
    z = diff / se if se and not math.isnan(se) else (0.0 if diff == 0 else math.copysign(math.inf, diff))
    return {"diff": diff, "se_samples": se_samples, "se_seeds": se_seeds, "z": z, "seeds": len(seeds),
            "per_seed": per_seed}


def verdict(diff: dict[str, Any], sign: int) -> tuple[str, str]:
    """(reproduced / not reproduced / inconclusive, why) for the claim "variant - binary has `sign`"."""
    z = diff["z"]
    if math.isnan(z):
        return "inconclusive", "not measured"
    if diff.get("seeds", 0) < 2:
        return "inconclusive", (f"one seed (z {z:+.1f} over samples only): the spread between training runs, "
                                "as large as the sampling error at this scale, is not measured")
    shown = f"z {z:+.1f} with the larger standard error"
    if sign * z >= 2:
        return "reproduced", f"same direction as the paper, {shown}"
    if sign * z <= -2:
        return "not reproduced", f"reversed: the opposite direction, {shown}"
    return "inconclusive", f"z within ±2 ({shown}): no difference resolved at this scale"


def load_runs(folder: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """variant -> seed -> result.json of the finished runs (the warm start under seed -1)."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted((folder / "runs").glob("*/result.json")):
        r = json.loads(path.read_text())
        out.setdefault(r["variant"], {})[-1 if r["seed"] is None else int(r["seed"])] = r
    return out


def summarize(runs: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Per variant: per-seed and mean metrics, differences against binary (paired), and the verdicts."""
    binary = runs.get("binary", {})
    warm = runs.get("warm_start", {}).get(-1)
    summary: dict[str, Any] = {"variants": {}, "claims": []}
    for variant in [v for v in VARIANTS if v in runs]:
        seeds = runs[variant]
        row: dict[str, Any] = {"seeds": sorted(seeds), "per_seed": {}}
        for s, r in sorted(seeds.items()):
            ev = r["eval"]
            row["per_seed"][s] = {m: (ev["ace"]["ace"] if m == "ace" else ev[m]["accuracy"]) for m in METRICS}
            row["per_seed"][s].update(steps=r["train"]["steps"], train_cpu_s=r["train"]["train_cpu_s"],
                                      train_wall_s=r["train"]["train_wall_s"])
        for m in (*METRICS, "steps", "train_cpu_s", "train_wall_s"):
            vals = [p[m] for p in row["per_seed"].values()]
            row[m] = _mean(vals)
            row[f"{m}_se_seeds"] = _sd(vals) / math.sqrt(len(vals)) if len(vals) > 1 else float("nan")
        for m in METRICS:
            if variant != "binary":
                row[f"{m}_vs_binary"] = paired({s: per_sample(r, m) for s, r in seeds.items()},
                                               {s: per_sample(r, m) for s, r in binary.items()})
            if warm is not None:
                row[f"{m}_vs_warm"] = paired({s: per_sample(r, m) for s, r in seeds.items()},
                                             {s: per_sample(warm, m) for s in seeds})
        summary["variants"][variant] = row
    if warm is not None:
        ev = warm["eval"]
        summary["warm_start"] = {m: (ev["ace"]["ace"] if m == "ace" else ev[m]["accuracy"]) for m in METRICS}
        summary["warm_start"]["ace_se"] = ev["ace"]["stderr"]
    for claim, variant, metric, sign, paper in CLAIMS:
        d = summary["variants"].get(variant, {}).get(f"{metric}_vs_binary")
        v, why = verdict(d, sign) if d else ("inconclusive", "not run")
        summary["claims"].append({"claim": claim, "variant": variant, "metric": metric, "paper": paper,
                                  "ours": d, "verdict": v, "reason": why})
    return summary


def _pct(x: float) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}"


def _diff(d: dict[str, Any] | None, scale: float = 100.0, digits: int = 1) -> str:
    if not d or math.isnan(d["diff"]):
        return "–"
    f = f"{{:+.{digits}f}}"
    g = f"{{:.{digits}f}}"
    return (f"{f.format(scale * d['diff'])} ± {g.format(scale * d['se_samples'])} / "
            f"{'–' if math.isnan(d['se_seeds']) else g.format(scale * d['se_seeds'])} (z {d['z']:+.1f})")


def table(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    """Markdown: the means with the papers' numbers, the differences against binary, the per-seed
    values and the verdicts."""
    lines = [
        f"Profile {meta.get('profile')} ({meta.get('config')}), warm start at SFT step "
        f"{meta.get('warm_start_step')}, {meta.get('budget_s', 0):.0f} s of training per run on the "
        f"{meta.get('clock')} clock, {meta.get('threads')} thread(s). Accuracies in %, mean over seeds ± "
        "standard error over seeds; ACE ×100.",
        "",
        "| variant | seeds | GRPO steps | held-out exact (strict format) | held-out calls only "
        "| unseen tools (strict) | unseen calls only | ACE | paper |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    w = summary.get("warm_start")
    if w:
        lines.append(f"| warm start (SFT) | – | 0 | {_pct(w['heldout_exact'])} | "
                     f"{_pct(w['heldout_calls'])} | {_pct(w['unseen_tools_exact'])} | "
                     f"{_pct(w['unseen_tools_calls'])} | "
                     f"{100 * w['ace']:+.1f} ± {100 * w['ace_se']:.1f} | |")
    for v, r in summary["variants"].items():
        cells = [f"{_pct(r[m])} ± {_pct(r[f'{m}_se_seeds'])}" for m in METRICS[:4]]
        ace = f"{100 * r['ace']:+.1f} ± {_pct(r['ace_se_seeds'])}"
        lines.append(f"| {VARIANTS[v]['label']} | {len(r['seeds'])} | {r['steps']:.0f} | "
                     f"{' | '.join(cells)} | "
                     f"{ace} | {PAPER[v]} |")
    lines += ["", "Differences against the binary reward, paired on the same samples and seeds (points; "
              "± standard error over samples / over seeds; z with the larger):", "",
              "| variant | held-out exact | held-out calls only | unseen tools (strict) | ACE ×100 |",
              "|---|---|---|---|---|"]
    for v, r in summary["variants"].items():
        if v == "binary":
            continue
        lines.append(f"| {VARIANTS[v]['label']} | {_diff(r.get('heldout_exact_vs_binary'))} | "
                     f"{_diff(r.get('heldout_calls_vs_binary'))} | "
                     f"{_diff(r.get('unseen_tools_exact_vs_binary'))} "
                     f"| {_diff(r.get('ace_vs_binary'))} |")
    lines += ["", "Against the warm start (paired, same notation):", "",
              "| variant | held-out exact | held-out calls only | unseen tools (strict) | ACE ×100 |",
              "|---|---|---|---|---|"]
    for v, r in summary["variants"].items():
        lines.append(f"| {VARIANTS[v]['label']} | {_diff(r.get('heldout_exact_vs_warm'))} | "
                     f"{_diff(r.get('heldout_calls_vs_warm'))} | "
                     f"{_diff(r.get('unseen_tools_exact_vs_warm'))} | "
                     f"{_diff(r.get('ace_vs_warm'))} |")
    lines += ["", "Per seed (held-out exact / calls only / unseen strict / ACE ×100, GRPO steps, "
              "CPU s / wall s):",
              ""]
    for v, r in summary["variants"].items():
        cells = [f"seed {s}: {_pct(p['heldout_exact'])} / {_pct(p['heldout_calls'])} / "
                 f"{_pct(p['unseen_tools_exact'])} / {100 * p['ace']:+.1f}, {p['steps']} steps, "
                 f"{p['train_cpu_s']:.0f} / {p['train_wall_s']:.0f} s" for s, p in r["per_seed"].items()]
        lines.append(f"- {VARIANTS[v]['label']}: " + "; ".join(cells))
    lines += ["", "| claim | paper | ours (variant − binary) | verdict | why |", "|---|---|---|---|---|"]
    for c in summary["claims"]:
        scale = 100.0
        lines.append(f"| {c['claim']} | {c['paper']} | {c['metric']}: {_diff(c['ours'], scale)} | "
                     f"**{c['verdict']}** | {c['reason']} |")
    return "\n".join(lines)


def plot(runs: dict[str, dict[int, dict[str, Any]]], summary: dict[str, Any], clock: str, path: Path) -> None:
    """Left: held-out curves against training time on the clock (one line per run, a colour per
    variant). Middle: held-out (strict and calls only) and unseen-tools accuracy per variant; right:
    ACE; both mean ± SE over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(14, 3.8), gridspec_kw={"width_ratios": [4, 4, 2.2]})
    key = "train_cpu_s" if clock == "cpu" else "train_s"
    for i, v in enumerate(v for v in VARIANTS if v in runs):
        for j, r in enumerate(runs[v].values()):
            t = {x["step"]: x.get(key, 0.0) for x in r["train"].get("log", [])}
            pts = [(t.get(p["step"], 0.0), 100 * p["accuracy"]) for p in r["train"]["curve"]
                   if p["step"] == 0 or p["step"] in t]
            ax.plot([a for a, _ in pts], [b for _, b in pts], color=f"C{i}", marker="o", ms=2.5, alpha=0.8,
                    label=VARIANTS[v]["label"] if j == 0 else None)
    ax.set_xlabel(f"training time ({clock} s, evaluations excluded)")
    ax.set_ylabel("held-out exact match, curve samples (%)")
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    names = [v for v in VARIANTS if v in summary["variants"]]
    xs = range(len(names))
    bars = (("heldout_exact", "held-out (strict)"), ("heldout_calls", "held-out (calls)"),
            ("unseen_tools_exact", "unseen tools (strict)"))
    for k, (m, label) in enumerate(bars):
        vals = [100 * summary["variants"][v][m] for v in names]
        errs = [100 * summary["variants"][v][f"{m}_se_seeds"] for v in names]
        errs = [0 if math.isnan(e) else e for e in errs]
        bx.bar([x + 0.27 * (k - 1) for x in xs], vals, width=0.27, yerr=errs, capsize=2, label=label)
    w = summary.get("warm_start")
    if w:
        bx.axhline(100 * w["heldout_exact"], color="grey", linestyle="--", linewidth=1,
                   label="warm start (strict)")
    bx.set_xticks(list(xs))
    bx.set_xticklabels([v.replace("_", "\n") for v in names], fontsize=8)
    bx.set_ylabel("accuracy (%), mean ± SE over seeds")
    bx.set_ylim(0, 100)
    bx.legend(fontsize=7)
    bx.grid(alpha=0.3, axis="y")
    aces = [100 * summary["variants"][v]["ace"] for v in names]
    errs = [100 * summary["variants"][v]["ace_se_seeds"] for v in names]
    cx.bar(list(xs), aces, yerr=[0 if math.isnan(e) else e for e in errs], capsize=2, color="C4")
    if w:
        cx.axhline(100 * w["ace"], color="grey", linestyle="--", linewidth=1, label="warm start")
        cx.legend(fontsize=7)
    cx.set_xticks(list(xs))
    cx.set_xticklabels([v.replace("_", "\n") for v in names], fontsize=8)
    cx.set_ylabel("ACE × 100 (mean CER), ± SE over seeds")
    cx.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def summarize_dir(folder: Path) -> int:
    """Read `folder`'s finished runs; print the table and write summary.{json,md} and ablations.png."""
    folder = Path(folder)
    runs = load_runs(folder)
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if not any(v in runs for v in VARIANTS):
        print(f"{folder}: no finished run yet")
        return 1
    summary = summarize(runs)
    text = table(summary, meta)
    print(text)
    (folder / "summary.json").write_text(json.dumps({"meta": meta, "summary": summary}, indent=1))
    (folder / "summary.md").write_text(text + "\n")
    plot(runs, summary, meta.get("clock", "cpu"), folder / "ablations.png")
    print(f"wrote {folder / 'summary.md'}, {folder / 'summary.json'} and {folder / 'ablations.png'}")
    return 0
