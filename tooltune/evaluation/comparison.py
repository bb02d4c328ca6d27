"""Comparing two evaluation runs: which manifest fields forbid it, and the score differences B - A.

Model and backend are what a comparison is about, so they may differ; every other choice behind the
scores (`COMPARABLE_KEYS`) must be equal for the runs to be called comparable. Where both folders hold
verdicts of the same registered benchmark, each difference comes with its paired standard error
(`tooltune.evaluation.uncertainty.paired_differences`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tooltune.evaluation.benchmark import BENCHMARKS
from tooltune.evaluation.uncertainty import flatten_numbers, paired_differences, read_verdicts

COMPARABLE_KEYS = ("benchmark", "categories", "subset_identity", "template", "controls.scoring",
                   "system_prompt_sha256", "controls", "data_sha256", "seeds", "sampling",
                   "packages.bfcl-eval", "packages.tooltune")
"""Manifest fields that must be equal for two runs' scores to be comparable (model and backend are
what a comparison is about, so they may differ)."""


def _get(d: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = d
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return cur


def _load(run: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """(manifest, summary) of a run folder; FileNotFoundError naming the folder when one is missing."""
    folder = Path(run)
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        summary = json.loads((folder / "summary.json").read_text())
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{folder}: not an evaluation run folder ({e.filename} missing)") from None
    return manifest, summary


def compare_runs(run_a: str | os.PathLike, run_b: str | os.PathLike) -> dict[str, Any]:
    """Score differences (B - A) of two run folders and the manifest differences that forbid comparing.

    `paired` (when both folders hold verdicts of the same registered benchmark): each score's B - A on
    the units both runs scored, with its paired standard error and z (`uncertainty.paired_differences`)."""
    (ma, sa), (mb, sb) = _load(run_a), _load(run_b)
    blockers = [{"field": k, "a": _get(ma, k), "b": _get(mb, k)} for k in COMPARABLE_KEYS
                if _get(ma, k) != _get(mb, k)]
    info = [{"field": k, "a": ma.get(k), "b": mb.get(k)} for k in ("model", "backend")
            if ma.get(k) != mb.get(k)]
    fa, fb = flatten_numbers(sa.get("scores", {})), flatten_numbers(sb.get("scores", {}))
    diffs = {k: {"a": fa[k], "b": fb[k], "delta": fb[k] - fa[k]} for k in sorted(set(fa) & set(fb))}
    paired = None
    name = ma.get("benchmark")
    has_verdicts = all((Path(run) / "verdicts.jsonl").is_file() for run in (run_a, run_b))
    if has_verdicts and name == mb.get("benchmark") and name in BENCHMARKS:
        paired = paired_differences(BENCHMARKS[name], read_verdicts(run_a), read_verdicts(run_b))
    return {"comparable": not blockers, "blockers": blockers, "differences": info, "scores": diffs,
            "paired": paired}
