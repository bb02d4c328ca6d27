"""A run's uncertainty: mean ± std over seeds, standard errors over entries for every score, and
paired differences between two runs.

Seeds: each seed's scores are flattened to dotted keys and every key gets its mean and sample standard
deviation over the seeds that have it (`aggregate_seeds`, the summary's `mean_std` and `scores`).

Every score a benchmark reports (a category's accuracy, BFCL's mean of category means, ACEBench's
weighted overall) is computed by that benchmark's own `scores` from per-entry verdicts, so its
sampling error is measured the same way for all of them: the stratified delete-one jackknife over
units (`Benchmark.subset_unit`), strata = categories. Each unit is left out once, the score recomputed
by `scores` (averaged over seeds as the summary averages them), and

    SE^2 = sum over categories c of (n_c - 1) / n_c * sum over units i in c of (S_-i - mean_c S_-)^2.

For a score that is a fixed-weight sum of category accuracies (BFCL's means of category means,
ACEBench's group means and weighted overall) this is exactly sum_c w_c^2 s_c^2 / n_c, with s_c^2 the
sample variance of the category's unit verdicts; for one category it is the usual s / sqrt(n); for an
accuracy pooled over N entries of several categories (API-Bank's overall, BFCL's live) it is that
formula to within a factor (N - 1) / N. A paired difference between two runs on
the same units uses the same leave-one-out on both runs at once, so the SE of B - A counts only the
entries on which the two runs disagree. Leaving out a unit changes a score only through its
category and verdicts, so the recomputation is cached on those (a few `scores` calls per category).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tooltune.evaluation.benchmark import Benchmark

COUNT_SUFFIXES = (".correct", ".total")
"""Flattened score keys that are counts of entries, not scores (no standard error)."""

UnitKey = tuple[str, str]


def flatten_numbers(d: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a nested mapping under dotted keys (bools and None left out)."""
    out: dict[str, float] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten_numbers(v, key + "."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


def mean_std(values: list[float]) -> dict[str, float]:
    """Mean and sample standard deviation (n-1; 0 for one seed)."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "std": std, "n": n}


def aggregate_seeds(per_seed: Mapping[int, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per metric (flattened dotted keys of each seed's scores): mean ± std over the seeds that have it."""
    flat = {s: flatten_numbers(v) for s, v in per_seed.items()}
    keys = sorted({k for f in flat.values() for k in f})
    return {k: mean_std([f[k] for f in flat.values() if k in f]) for k in keys}


def seed_mean_scores(bench: Benchmark, records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """`bench.scores` of each seed's records, flattened, each key averaged over the seeds that have it
    (as `summary.json`'s `scores`)."""
    seeds = sorted({r.get("seed", 0) for r in records}, key=str)
    per_seed = [flatten_numbers(bench.scores([r for r in records if r.get("seed", 0) == s])) for s in seeds]
    keys = {k for scores in per_seed for k in scores}
    return {k: sum(vals) / len(vals) for k in keys if (vals := [s[k] for s in per_seed if k in s])}


def _signature(records: Iterable[Mapping[str, Any]]) -> str:
    """What a unit's scores depend on: its records without their ids and error texts."""
    return json.dumps(sorted(json.dumps({k: v for k, v in r.items() if k not in ("id", "error")},
                                        sort_keys=True, default=str) for r in records))


class _LeaveOneOut:
    """The scores of one run with each unit left out in turn (cached on category and verdicts)."""

    def __init__(self, bench: Benchmark, records: Sequence[Mapping[str, Any]],
                 units: Mapping[UnitKey, list[Mapping[str, Any]]], unit_keys: Sequence[UnitKey]) -> None:
        self.bench, self.records, self.units = bench, records, units
        self.order = {id(r): key for key in unit_keys for r in units[key]}
        self.cache: dict[tuple[str, str], dict[str, float]] = {}

    def without(self, key: UnitKey) -> dict[str, float]:
        cached = (key[0], _signature(self.units[key]))
        if cached not in self.cache:
            kept = [r for r in self.records if self.order.get(id(r)) != key]
            self.cache[cached] = seed_mean_scores(self.bench, kept)
        return self.cache[cached]


def _group(records: Sequence[Mapping[str, Any]], unit_of: Callable[[str, str], str]
           ) -> dict[UnitKey, list[Mapping[str, Any]]]:
    units: dict[UnitKey, list[Mapping[str, Any]]] = {}
    for r in records:
        units.setdefault((r["category"], unit_of(r["id"], r["category"])), []).append(r)
    return units


def _score_keys(scores: Mapping[str, float]) -> list[str]:
    return sorted(k for k in scores if not k.endswith(COUNT_SUFFIXES))


def _jackknife_se(strata: Mapping[str, list[dict[str, float]]], keys: Sequence[str]) -> dict[str, float]:
    """SE per key from the leave-one-out values of each stratum; a key some leave-out lacks has none."""
    variance = dict.fromkeys(keys, 0.0)
    for values in strata.values():
        n = len(values)
        if n < 2:
            continue
        for k in list(variance):
            xs = [v[k] for v in values if k in v]
            if len(xs) != n:
                del variance[k]
                continue
            mean = sum(xs) / n
            variance[k] += (n - 1) / n * sum((x - mean) ** 2 for x in xs)
    return {k: math.sqrt(v) for k, v in variance.items()}


def standard_errors(bench: Benchmark, records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Stratified jackknife SE over units of every score `bench.scores` gives for `records` (all
    seeds: a unit is left out of every seed at once)."""
    units = _group(records, bench.subset_unit)
    keys = list(units)
    loo = _LeaveOneOut(bench, records, units, keys)
    strata: dict[str, list[dict[str, float]]] = {}
    for key in keys:
        strata.setdefault(key[0], []).append(loo.without(key))
    return _jackknife_se(strata, _score_keys(seed_mean_scores(bench, records)))


def paired_differences(bench: Benchmark, records_a: Sequence[Mapping[str, Any]],
                       records_b: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """B - A for every score both runs have, on the units both runs scored, with its paired SE and
    z = delta / SE (None when SE is 0): {"units", "only_a", "only_b", "scores": {key: {a, b, delta,
    se, z}}}."""
    units_a, units_b = _group(records_a, bench.subset_unit), _group(records_b, bench.subset_unit)
    common = sorted(set(units_a) & set(units_b))
    kept_a = [r for key in common for r in units_a[key]]
    kept_b = [r for key in common for r in units_b[key]]
    loo_a = _LeaveOneOut(bench, kept_a, units_a, common)
    loo_b = _LeaveOneOut(bench, kept_b, units_b, common)
    full_a, full_b = seed_mean_scores(bench, kept_a), seed_mean_scores(bench, kept_b)
    keys = [k for k in _score_keys(full_a) if k in full_b]
    strata: dict[str, list[dict[str, float]]] = {}
    for key in common:
        a, b = loo_a.without(key), loo_b.without(key)
        strata.setdefault(key[0], []).append({k: b[k] - a[k] for k in keys if k in a and k in b})
    se = _jackknife_se(strata, keys)
    scores = {}
    for k in keys:
        delta = full_b[k] - full_a[k]
        s = se.get(k)
        scores[k] = {"a": full_a[k], "b": full_b[k], "delta": delta, "se": s,
                     "z": delta / s if s else None}
    return {"units": len(common), "only_a": len(set(units_a) - set(units_b)),
            "only_b": len(set(units_b) - set(units_a)), "scores": scores}


def read_verdicts(folder: str | os.PathLike) -> list[dict[str, Any]]:
    """The verdict records of a run folder's verdicts.jsonl (lines that are not verdicts are skipped;
    a (seed, id) counts once, its first line, as the run counted it)."""
    path = Path(folder) / "verdicts.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: not an evaluation run folder (verdicts.jsonl missing)")
    out, seen = [], set()
    for line in path.read_text(encoding="utf-8").split("\n"):
        try:
            rec = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str) or "category" not in rec:
            continue
        key = (rec.get("seed", 0), rec["id"])
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out
