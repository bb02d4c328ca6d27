"""Evaluation protocol: controls, seeds (mean ± std), a manifest with every result, resumable verdicts.

The efficiency paper (arXiv 2606.00135) shows tool-calling scores move with the seed, the system prompt,
how multi-turn history is serialized and whether earlier reasoning is kept; so every such choice is
an explicit control, written to `manifest.json` beside the scores, and `compare_runs` refuses to call
two runs comparable when any of them differs. `run_identity` picks the manifest fields that define a
run's results: a run folder is resumed only by the same run (`tooltune.rundir`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import platform
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tooltune.config import option
from tooltune.evaluation.benchmark import BENCHMARKS
from tooltune.evaluation.uncertainty import flatten_numbers, paired_differences, read_verdicts
from tooltune.prompts import PromptControls
from tooltune.rundir import drop_torn_tail
from tooltune.schema import Scoring

logger = logging.getLogger(__name__)

PACKAGES = ("tooltune", "bfcl-eval", "torch", "transformers", "trl", "numpy")

COMPARABLE_KEYS = ("benchmark", "categories", "subset_identity", "template", "controls.scoring",
                   "system_prompt_sha256", "controls", "data_sha256", "seeds", "sampling",
                   "packages.bfcl-eval", "packages.tooltune")
"""Manifest fields that must be equal for two runs' scores to be comparable (model and backend are
what a comparison is about, so they may differ)."""



@dataclass
class Controls(PromptControls):
    """The choices that move tool-calling scores; every one is recorded with the result.

    The prompt controls (template, system_prompt, history, keep_reasoning; their checks, `resolve()`,
    `system_text()` and `system_sha256(extra)`) come from `tooltune.prompts.PromptControls`. Each field
    is a `tooltune eval` flag of the same name (`--keep-reasoning false`, `--name-style underscore`),
    generated from this declaration."""

    mode: str = option("strict", "Format mode of the completion parser.", ("strict", "substring"))
    name_style: str = option(
        "dotted",
        "BFCL dotted function names shown and expected as math.factorial (dotted) or math_factorial "
        "(underscore).",
        ("dotted", "underscore"),
    )
    scoring: Scoring = option(
        Scoring.OFFICIAL,
        "Scoring rules: official (the benchmark's official code, rule for rule, its bugs included: the "
        "numbers to report under the benchmark's name) or corrected (each deviation a named fix listed in "
        "docs/evaluation.md).",
        tuple(Scoring),
    )

    def __post_init__(self) -> None:
        if self.scoring in tuple(Scoring):  # a plain word given in code reads as the typed mode
            self.scoring = Scoring(self.scoring)


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
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


def run_identity(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a manifest that define the run's results, flat (controls and sampling unnested).

    What the scores depend on: benchmark, categories, the subset, what generated (model, backend, digests of
    replayed predictions), the controls (the system prompt by its sha256), sampling, seeds, the data
    files' sha256 and the versions of the packages that score (`Benchmark.scoring_packages`). The Python
    version and the other packages are recorded in the manifest but do not block a resume."""
    controls = {k: v for k, v in (manifest.get("controls") or {}).items() if k != "system_prompt"}
    packages = manifest.get("packages") or {}
    name = manifest.get("benchmark", "")
    scoring = BENCHMARKS[name].scoring_packages if name in BENCHMARKS else ("tooltune",)
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
        "packages": {name: packages.get(name) for name in scoring},
    }


# --------------------------------------------------------------------------------------------
# Resumable verdict log


class VerdictLog:
    """Append-only `verdicts.jsonl`: one line per (seed, id), flushed as produced.

    Reopening with `resume=True` keeps the finished lines and reports which (seed, id) pairs are done:
    a torn last line from a kill is cut off before anything is appended, and a (seed, id) that
    appears more than once counts once (its first line; the file is rewritten without the repeats
    and without lines that are not verdicts). Without resume the file starts empty.
    """

    def __init__(self, path: str | os.PathLike, resume: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records: list[dict[str, Any]] = []
        self.done: set[tuple[Any, str]] = set()
        if resume and self.path.exists():
            drop_torn_tail(self.path)
            dropped = repeated = 0
            for line in self.path.read_text(encoding="utf-8").split("\n"):  # not splitlines: U+2028
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    rec = None
                if not isinstance(rec, dict) or "id" not in rec:
                    dropped += 1
                    continue
                key = (rec.get("seed", 0), rec["id"])
                if key in self.done:
                    repeated += 1
                    continue
                self.done.add(key)
                self.records.append(rec)
            if dropped or repeated:
                logger.warning("%s: dropping %d line(s) that are not verdicts and %d repeated (seed, id) "
                               "line(s)", self.path, dropped, repeated)
                tmp = self.path.with_name(f".{self.path.name}.tmp")
                tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records),
                               encoding="utf-8")
                os.replace(tmp, self.path)
        else:
            self.path.write_text("", encoding="utf-8")
        self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (held open while the run appends)

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one verdict; a (seed, id) already recorded is not recorded again."""
        rec = dict(record)
        key = (rec.get("seed", 0), rec["id"])
        if key in self.done:
            logger.warning("%s: %s of seed %s is already recorded; not adding it again", self.path,
                           key[1], key[0])
            return
        self.records.append(rec)
        self.done.add(key)
        self._f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> VerdictLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# Seeds


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


# --------------------------------------------------------------------------------------------
# Comparing runs


def _get(d: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = d
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return cur


def compare_runs(run_a: str | os.PathLike, run_b: str | os.PathLike) -> dict[str, Any]:
    """Score differences (B - A) of two run folders and the manifest differences that forbid comparing.

    `paired` (when both folders hold verdicts of the same registered benchmark): each score's B - A on
    the units both runs scored, with its paired standard error and z (`uncertainty.paired_differences`)."""
    loaded = []
    for run in (run_a, run_b):
        folder = Path(run)
        try:
            manifest = json.loads((folder / "manifest.json").read_text())
            summary = json.loads((folder / "summary.json").read_text())
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f"{folder}: not an evaluation run folder ({e.filename} missing)") from None
        loaded.append((manifest, summary))
    (ma, sa), (mb, sb) = loaded
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
