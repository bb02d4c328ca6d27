"""What one evaluation run is given: `RunOptions`, the run's flags of `tooltune eval <benchmark>`, and
`EvalOptions`, the one object `runner.evaluate` takes (the run's options, its controls, sampling and
failure policy, and what only a caller in code hands over: the model's label, a user simulator).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from tooltune.config import check_values, option
from tooltune.evaluation.benchmark import DATA_DIR_ENV
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.failures import FailurePolicy
from tooltune.evaluation.subset import SubsetSpec
from tooltune.generation import Backend, Sampling


@dataclass
class RunOptions:
    """One evaluation run besides its controls, sampling and backend (`tooltune eval <benchmark>` flags)."""

    out: str = option(
        "",
        "Output folder: verdicts.jsonl, summary.json, manifest.json, run.json, report.md (required; new "
        "or empty, or this run's folder with --resume).",
    )
    categories: str = option("", "Comma-separated categories or groups (empty = all).")
    seeds: int = option(
        3,
        "Seeds 0..N-1, one generation pass each; scores are mean ± std over seeds. The protocol default "
        "is 3 seeds at temperature 0.7 (replayed predictions: one seed per file).",
        min=1,
    )
    data_dir: str = option(
        "",
        f"Folder of the benchmark's files (empty = ${DATA_DIR_ENV}/<benchmark>); BFCL's data comes with "
        "bfcl-eval.",
    )
    resume: bool = option(
        False,
        "Continue the run in --out: keep its verdicts and skip the entries already scored; refused "
        "when any setting that defines the results differs from the folder's run.json.",
    )
    partial: bool = option(
        False, "With predictions: skip entries that have no prediction instead of failing them."
    )
    report: bool = option(True, "Write DIR/report.md and its PNG bar chart.")
    subset: int = option(
        0,
        "Score at most N entries of each category (0 = all), chosen by a permutation seeded with "
        "--subset-seed that does not depend on file order; the report states the subset.",
        min=0,
    )
    subset_seed: int = option(0, "Seed of the --subset permutation (the same seed picks the same entries).")
    subset_ids: str = option(
        "",
        "Score only the entries whose ids this file lists (one id per line, # comments); an id that is "
        "no entry of the categories evaluated is refused.",
    )
    stop_decided: bool = option(
        True,
        "End a local model's greedy completion as soon as its verdict is decided: under the strict format "
        "of a two-block template (tool_n1, r2if) a prefix that no continuation can complete into a passing "
        "format is a failed format whatever follows (docs/evaluation.md). Verdicts are unchanged; the "
        "recorded completion is the text up to that point. Recorded in the manifest, not in the run's "
        "identity.",
    )

    def validate(self) -> RunOptions:
        check_values(self)
        self.subset_spec()
        return self

    def subset_spec(self) -> SubsetSpec:
        """The subset these options choose (inactive: the whole benchmark)."""
        return SubsetSpec(self.subset, self.subset_seed, self.subset_ids)


@dataclass
class EvalOptions(RunOptions):
    """One `runner.evaluate` call: the run's options (`RunOptions`; `out` is required) and everything
    else the run is given.

    `controls`: None for the benchmark's defaults (`Benchmark.controls`); `sampling`: the protocol's
    (temperature 0.7); `failures`: when entries that fail to generate stop the run; `model`: the label
    recorded in the manifest; `user_backend`: the user of a `SimulatesUsers` benchmark's entries
    (skipped without one); `show_progress`: a progress bar per run. Not a config section: the fields
    beyond `RunOptions` are objects handed over in code, not flags (`tooltune eval` builds one with `of`)."""

    controls: Controls | None = None
    sampling: Sampling = field(default_factory=Sampling)
    failures: FailurePolicy = field(default_factory=FailurePolicy)
    model: str | None = None
    user_backend: Backend | None = None
    show_progress: bool = True

    @classmethod
    def of(cls, run: RunOptions, **rest: Any) -> EvalOptions:
        """`run`'s options with the other fields given by name."""
        return cls(**{f.name: getattr(run, f.name) for f in fields(RunOptions)}, **rest)
