"""Fixed subsets of a benchmark: at most N units per category (seeded), or the units of an id list.

A subset lets a machine without an accelerator score a checkpoint in minutes on entries that stay the
same from run to run. Selection works on *units*, what a benchmark scores as one item
(`Benchmark.subset_unit`: an entry, or all turns of one ACEBench multi-turn dialogue), so a subset never
splits an item its scorer joins. A unit's rank inside its category is the sha256 of
``"<seed>:<unit id>"``: the choice does not depend on the order of files or entries, and the same seed
picks the same units on every machine. Scores of a subset are computed by the benchmark's own `scores`
exactly as for the full set (BFCL's category means are means of the subset's categories).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune.config import ConfigError
from tooltune.evaluation.benchmark import Prepared

MAX_ID_LINE = 1000
"""Longest line of an id file that is read as an id (longer lines are refused)."""


@dataclass(frozen=True)
class SubsetSpec:
    """Which part of a benchmark a run scores: `per_category` units of each category ranked by `seed`,
    or the units named in `ids_file` (one id per line). Neither set: the whole benchmark."""

    per_category: int = 0
    seed: int = 0
    ids_file: str = ""

    def __post_init__(self) -> None:
        if self.per_category and self.ids_file:
            raise ConfigError("subset: give --subset N (per category) or --subset-ids FILE, not both")
        if self.per_category < 0:
            raise ConfigError(f"subset: {self.per_category} entries per category; give a count >= 1 "
                              "(0 = all)")

    @property
    def active(self) -> bool:
        return bool(self.per_category or self.ids_file)

    def ids(self) -> list[str]:
        """The ids of `ids_file` in file order (blank lines and lines starting with # skipped)."""
        path = Path(self.ids_file)
        if not path.is_file():
            raise ConfigError(f"subset_ids: {path} is not a file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(f"subset_ids: {path} is not UTF-8 text ({e.reason})") from None
        ids: list[str] = []
        for number, line in enumerate(text.splitlines(), 1):
            item = line.strip()
            if not item or item.startswith("#"):
                continue
            if len(item) > MAX_ID_LINE:
                raise ConfigError(f"subset_ids: {path} line {number}: longer than {MAX_ID_LINE} characters")
            ids.append(item)
        if not ids:
            raise ConfigError(f"subset_ids: {path} names no id")
        return ids

    def identity(self) -> dict[str, Any] | None:
        """What defines the subset's entries (None for the whole benchmark): the count and seed, or
        the sha256 of the id file (its path may differ between machines)."""
        if not self.active:
            return None
        if self.ids_file:
            digest = hashlib.sha256(Path(self.ids_file).read_bytes()).hexdigest()
            return {"ids_file": Path(self.ids_file).name, "ids_sha256": digest}
        return {"per_category": self.per_category, "seed": self.seed}


def unit_rank(seed: int, unit: str) -> str:
    """A unit's place in its category's seeded permutation (sort key): independent of any order."""
    return hashlib.sha256(f"{seed}:{unit}".encode()).hexdigest()


def _units(prep: Prepared, unit_of: Callable[[str, str], str]) -> dict[str, dict[str, list[str]]]:
    """category -> unit -> entry ids, over the single-turn tasks and the multi-turn episodes."""
    out: dict[str, dict[str, list[str]]] = {}
    for item in [*prep.tasks, *prep.episodes]:
        out.setdefault(item.category, {}).setdefault(unit_of(item.id, item.category), []).append(item.id)
    return out


def select(prep: Prepared, spec: SubsetSpec, unit_of: Callable[[str, str], str]
           ) -> tuple[Prepared, dict[str, Any] | None]:
    """`prep` restricted to `spec`'s units, and the record of the subset for the manifest and report
    (its identity, per category units chosen / available and entries; None without a subset).

    An id list names entry ids or unit ids of the categories evaluated; ids that are neither are refused
    in one line naming them."""
    if not spec.active:
        return prep, None
    units = _units(prep, unit_of)
    if spec.ids_file:
        chosen = _chosen_by_ids(units, spec.ids(), spec.ids_file)
    else:
        chosen = {c: sorted(u, key=lambda x: unit_rank(spec.seed, x))[: spec.per_category]
                  for c, u in units.items()}
    keep = {e for c, us in chosen.items() for u in us for e in units[c][u]}
    tasks = [t for t in prep.tasks if t.id in keep]
    episodes = [e for e in prep.episodes if e.id in keep]
    counts = {c: {"units": len(chosen.get(c, [])), "available": len(units[c]),
                  "entries": sum(len(units[c][u]) for u in chosen.get(c, []))} for c in sorted(units)}
    subset = {**(spec.identity() or {}), "categories": counts,
              "units": sum(v["units"] for v in counts.values()),
              "entries": sum(v["entries"] for v in counts.values())}
    restricted = Prepared(tasks, prep.data_files, episodes, prep.run_episodes, prep.system_extra,
                          prep.skipped)
    return restricted, subset


def _chosen_by_ids(units: Mapping[str, Mapping[str, list[str]]], ids: list[str], path: str
                   ) -> dict[str, list[str]]:
    unit_of_entry = {e: (c, u) for c, us in units.items() for u, es in us.items() for e in es}
    unit_names = {u: c for c, us in units.items() for u in us}
    chosen: dict[str, list[str]] = {}
    unknown = []
    for item in ids:
        if item in unit_of_entry:
            category, unit = unit_of_entry[item]
        elif item in unit_names:
            category, unit = unit_names[item], item
        else:
            unknown.append(item)
            continue
        if unit not in chosen.setdefault(category, []):
            chosen[category].append(unit)
    if unknown:
        shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
        raise ConfigError(f"subset_ids: {path}: {len(unknown)} id(s) are no entry of the categories "
                          f"evaluated: {shown}")
    return chosen


def describe_subset(subset: Mapping[str, Any] | None) -> str:
    """One line stating a run's subset ("all entries" without one)."""
    if not subset:
        return "all entries"
    how = (f"ids from {subset['ids_file']} (sha256 {subset['ids_sha256'][:12]})" if "ids_sha256" in subset
           else f"at most {subset['per_category']} per category, seed {subset['seed']}")
    per = ", ".join(f"{c} {v['units']}/{v['available']}" for c, v in subset["categories"].items())
    return f"subset: {how}; {subset['units']} units, {subset['entries']} entries ({per})"
