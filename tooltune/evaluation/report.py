"""Markdown report and PNG bar charts from evaluation run folders (summary.json + manifest.json).

Scores are shown as mean ± std over seeds (in percent) with their standard error over entries (SE,
`uncertainty.standard_errors`; a run without one shows –), the entries scored (all, or the subset and
its per-category counts), each run labelled with its model, template and
scoring mode (`official` or `corrected`); a report over runs scored under different rules says so at the
top. Each run with two categories or more gets a bar chart (accuracy in percent on a 0-100 axis, ± 1
binomial standard error over each category's entries); a run of one category gets its table only, and
a benchmark table none of whose columns was run is not drawn as a table of dashes. A benchmark's own
tables come from `Benchmark.report_tables` (BFCL: a Tool-N1 Table-2-style table,
Non-live: simple, multiple, parallel, parallel multiple, overall; Live: the same; Overall = mean of
Non-live and Live, next to the current leaderboard's aggregates).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tooltune.evaluation.benchmark import BENCHMARKS
from tooltune.evaluation.failures import failure_line
from tooltune.evaluation.subset import describe_subset

logger = logging.getLogger(__name__)

def load_run(folder: str | os.PathLike) -> dict[str, Any]:
    folder = Path(folder)
    summary = json.loads((folder / "summary.json").read_text())
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    return {"folder": folder, "summary": summary, "manifest": manifest}


def _cell(mean_std: dict[str, Any], key: str) -> str:
    v = mean_std.get(key)
    if v is None:
        return "–"
    return f"{100 * v['mean']:.1f}" + (f" ± {100 * v['std']:.1f}" if v["n"] > 1 else "")


def _se_cell(summary: dict[str, Any], key: str) -> str:
    se = (summary.get("standard_errors") or {}).get(key)
    return "–" if se is None else f"{100 * se:.1f}"


def _label(run: dict[str, Any]) -> str:
    m = run["manifest"]
    scoring = (m.get("controls") or {}).get("scoring") or "unrecorded"
    model = m.get("model") or m.get("backend") or run["folder"].name
    return f"{model} ({m.get('template', '?')}, {scoring} scoring)"


def _table(runs: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]],
           not_run: Mapping[str, str] | None = None) -> list[str]:
    """One row per run; a key in `not_run` without a value shows its text (a part that cannot run)."""
    not_run = not_run or {}
    lines = ["| Run | " + " | ".join(c for c, _ in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for r in runs:
        ms = r["summary"].get("mean_std", {})
        cells = [not_run[k] if k in not_run and ms.get(k) is None else
                 _cell(ms, k) + (f" (SE {s})" if (s := _se_cell(r["summary"], k)) != "–" else "")
                 for _, k in columns]
        lines.append(f"| {_label(r)} | " + " | ".join(cells) + " |")
    return lines


def _categories(mean_std: dict[str, Any]) -> list[str]:
    keys = [k for k in mean_std if k.startswith("categories.") and k.endswith(".accuracy")]
    return sorted({k.split(".")[1] for k in keys})


def binomial_se(accuracy: float, n: float) -> float:
    """Standard error of an accuracy measured on `n` entries: sqrt(p(1 - p) / n)."""
    return math.sqrt(max(0.0, accuracy * (1 - accuracy)) / n) if n > 0 else 0.0


def category_figure(run: dict[str, Any]) -> Any:
    """Bar chart (a matplotlib Figure) of per-category accuracy (mean over seeds) for one run, error bars
    ± 1 binomial standard error on the category's entries; None when fewer than two categories were
    run, where the report's table already says everything a chart would."""
    ms = run["summary"].get("mean_std", {})
    cats = _categories(ms)
    if len(cats) < 2:
        return None
    import matplotlib  # deferred: only plotting needs matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: only plotting needs matplotlib

    acc = [ms[f"categories.{c}.accuracy"]["mean"] for c in cats]
    entries = [ms.get(f"categories.{c}.total", {}).get("mean", 0) for c in cats]
    errors = [100 * binomial_se(a, n) for a, n in zip(acc, entries)]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(cats) + 2), 4))
    ax.bar(range(len(cats)), [100 * a for a in acc], yerr=errors, capsize=3, color="#4C72B0")
    ax.set_xticks(range(len(cats)), [f"{c} ({n:.0f})" for c, n in zip(cats, entries)], rotation=60,
                  ha="right", fontsize=8)
    ax.set_xlabel("category (entries)")
    seeds = run["summary"].get("seeds") or [0]
    ax.set_ylabel(f"accuracy (%), mean of {len(seeds)} seed{'s' if len(seeds) > 1 else ''}")
    ax.set_ylim(0, 105)
    ax.set_title(f"{run['summary'].get('benchmark', '')}: {_label(run)}\n"
                 "error bars: ± 1 binomial standard error over the category's entries", fontsize=9)
    fig.tight_layout()
    return fig


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt  # deferred: only plotting needs matplotlib

    try:
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path


def category_chart(run: dict[str, Any], path: str | os.PathLike) -> Path | None:
    """`category_figure` saved as a PNG at `path`; None (no file) for a run of fewer than two categories."""
    fig = category_figure(run)
    if fig is None:
        return None
    import matplotlib.pyplot as plt  # deferred: only plotting needs matplotlib

    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def _has_values(runs: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> bool:
    return any(r["summary"].get("mean_std", {}).get(k) is not None for r in runs for _, k in columns)


def write_report(run_dirs: Sequence[str | os.PathLike], out_md: str | os.PathLike) -> Path:
    """Markdown with per-category tables (and BFCL's Table-2 and leaderboard tables) plus one PNG per run."""
    runs = [load_run(d) for d in run_dirs]
    out = Path(out_md)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Evaluation report", ""]
    for name in BENCHMARKS:
        bench_runs = [r for r in runs if r["summary"].get("benchmark") == name]
        bench = BENCHMARKS[name]
        if not bench_runs or not bench.report_tables:
            continue
        for title, columns in bench.report_tables:
            if not _has_values(bench_runs, columns):  # none of its columns was run: no table of dashes
                lines += [f"## {title}", "", "None of this table's columns was run.", ""]
                continue
            lines += [f"## {title}", "", *_table(bench_runs, columns, bench.report_not_run), ""]
        formulas = bench_runs[0]["summary"].get("formulas", {})
        lines += [f"- **{k}** = {v}" for k, v in formulas.items()] + [""]
    modes = sorted({(r["manifest"].get("controls") or {}).get("scoring") or "unrecorded" for r in runs})
    if len(modes) > 1:
        lines += [f"**Runs scored under different rules ({', '.join(modes)}): their numbers are not "
                  "comparable.**", ""]
    for i, r in enumerate(runs):
        ms = r["summary"].get("mean_std", {})
        cats = _categories(ms)
        png = category_chart(r, out.with_name(f"{out.stem}_{i}_{r['summary'].get('benchmark', 'run')}.png"))
        m = r["manifest"]
        lines += [f"## {r['summary'].get('benchmark', '')}: {_label(r)}", "",
                  f"Seeds {r['summary'].get('seeds')}; controls {json.dumps(m.get('controls', {}))}; "
                  f"system prompt sha256 {str(m.get('system_prompt_sha256', ''))[:12]}", "",
                  f"Entries: {describe_subset(r['summary'].get('subset'))}", "",
                  *([f"**{line[0].upper()}{line[1:]}**", ""] if (line := failure_line(r["summary"])) else []),
                  "| Category | Accuracy (%) | SE (%) | Entries |", "|---|---|---|---|"]
        summary = r["summary"]
        for c in cats:
            total = ms.get(f"categories.{c}.total", {}).get("mean", 0)
            key = f"categories.{c}.accuracy"
            lines.append(f"| {c} | {_cell(ms, key)} | {_se_cell(summary, key)} | {total:.0f} |")
        for key in sorted(k for k in ms if not k.startswith(("categories.", "table2.", "leaderboard."))):
            lines.append(f"| **{key}** | {_cell(ms, key)} | {_se_cell(summary, key)} | |")
        lines += ["", f"![{png.stem}]({png.name})" if png else "(one category: no chart)", ""]
        bench = BENCHMARKS[r["summary"]["benchmark"]] if r["summary"].get("benchmark") in BENCHMARKS else None
        for name, fig in bench.report_figures(r["summary"], _label(r)) if bench is not None else []:
            lines += [f"![{name}]({_save(fig, out.with_name(f'{out.stem}_{i}_{name}.png')).name})", ""]
        for s in r["summary"].get("skipped") or []:
            lines.append(f"- skipped: {s}")
    out.write_text("\n".join(lines) + "\n")
    return out
