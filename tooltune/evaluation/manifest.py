"""A run's manifest and identity: everything its scores depend on, and the part that defines them.

`build_manifest` writes every choice behind a run's scores into `manifest.json` (the protocol controls,
the system prompt by its sha256, sampling, seeds, the data files' sha256, package versions), so two
runs can be compared field by field (`tooltune.evaluation.comparison`). `run_identity` picks the
manifest fields that define the run's results: a run folder is resumed only by the same run
(`tooltune.rundir`).
"""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from tooltune.evaluation.controls import Controls

PACKAGES = ("tooltune", "bfcl-eval", "torch", "transformers", "trl", "numpy")
"""Packages whose versions every manifest records."""


RETIRED_IDENTITY = {"name_style": "dotted", "controls": {"name_style": "dotted"}}
"""Identity fields no longer recorded for every benchmark, with the value every run recorded them at
(`tooltune eval` keeps controls at the top, `eval ace` under `controls`): `name_style` is BFCL's own
control now, and other benchmarks' folders made before still resume (`rundir.check_identity`)."""


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """The installed version of each package (None when it is not installed)."""
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def file_sha256(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """sha256 of each file, keyed by file name (the folder differs between machines)."""
    out = {}
    for p in sorted({str(p) for p in paths}):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        out[Path(p).name] = h.hexdigest()
    return out


def build_manifest(
    benchmark: str,
    categories: list[str],
    controls: Controls,
    seeds: list[int],
    model: str | None,
    backend: str,
    data_files: Iterable[str | os.PathLike],
    sampling: Mapping[str, Any] | None = None,
    system_extra: str = "",
    predictions_sha256: Mapping[str, str] | None = None,
    subset: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything a run's scores depend on; `predictions_sha256`: seed -> digest of replayed predictions;
    `subset`: the entries chosen (`tooltune.evaluation.subset.select`), None for the whole benchmark."""
    return {
        "benchmark": benchmark,
        "categories": list(categories),
        "subset": dict(subset) if subset else None,
        "subset_identity": subset_identity(subset),
        "model": model,
        "backend": backend,
        "predictions_sha256": dict(predictions_sha256 or {}),
        "template": controls.template,
        "system_prompt_sha256": controls.system_sha256(system_extra),
        "controls": asdict(controls),
        "seeds": list(seeds),
        "sampling": dict(sampling or {}),
        "packages": package_versions(),
        "python": platform.python_version(),
        "data_sha256": file_sha256(data_files),
    }


def subset_identity(subset: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What defines a subset's entries (count and seed, or the id file's sha256); None for all entries."""
    if not subset:
        return None
    return {k: subset[k] for k in ("per_category", "seed", "ids_sha256") if k in subset}


def run_identity(manifest: Mapping[str, Any], scoring_packages: Sequence[str] = ("tooltune",)
                 ) -> dict[str, Any]:
    """The fields of a manifest that define the run's results, flat (controls and sampling unnested).

    What the scores depend on: benchmark, categories, the subset, what generated (model, backend, digests of
    replayed predictions), the controls (the system prompt by its sha256), sampling, seeds, the data
    files' sha256 and the versions of `scoring_packages`, the packages whose code scores (the benchmark's
    `Benchmark.scoring_packages`: the caller passes them, so that the manifest needs no benchmark
    registry). The Python version and the other packages are recorded in the manifest but do not block
    a resume."""
    controls = {k: v for k, v in (manifest.get("controls") or {}).items() if k != "system_prompt"}
    packages = manifest.get("packages") or {}
    return {
        "command": "eval",
        "benchmark": manifest.get("benchmark"),
        "categories": manifest.get("categories"),
        **({"subset": manifest["subset_identity"]} if manifest.get("subset_identity") else {}),
        "model": manifest.get("model"),
        "backend": manifest.get("backend"),
        "predictions_sha256": manifest.get("predictions_sha256") or {},
        "system_prompt_sha256": manifest.get("system_prompt_sha256"),
        **controls,
        **(manifest.get("sampling") or {}),
        "seeds": manifest.get("seeds"),
        "data_sha256": manifest.get("data_sha256"),
        "packages": {name: packages.get(name) for name in scoring_packages},
    }
