"""The experiment's settings: `QuickstartConfig`, loaded from a YAML file with dotted overrides.

`configs/quickstart.yaml` holds the measured values (`make demo` runs it) and
`configs/quickstart_mini.yaml` the smoke-test sizes on top of it (`extends:` names the file a config
changes). The `train:` section is a `tooltune.training` config: the quickstart runs its SFT section
(with the warm-start rule) and its GRPO section, and writes it, paths filled in, to `DIR/train.yaml`,
which `tooltune train --config` runs again. The keys in `DERIVED` are filled in by the run (the seed and
the run folder's paths) and may not be set.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune import config as config_mechanism
from tooltune.config import ConfigError, option, section
from tooltune.data.synthetic.quickstart_task import TaskConfig
from tooltune.models import SIZES
from tooltune.training.config import TrainConfig

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
"""The repository's measured quickstart settings."""

DERIVED = {
    "task.seed": "the top-level seed",
    "train.run.seed": "the top-level seed",
    "train.run.output_dir": "the run folder",
    "train.model.name_or_path": "the run folder (models/base, then models/sft)",
    "train.data.train": "the run folder (data/train.jsonl)",
    "train.data.val": "the run folder (data/val.jsonl)",
    "train.sft.enabled": "the pipeline (SFT warm start, then GRPO)",
    "train.grpo.enabled": "the pipeline (SFT warm start, then GRPO)",
}
"""Keys the run sets itself -> what sets them."""


@dataclass
class WarmStartConfig:
    min_steps: int = option(500, "First SFT step at which the warm-start rule is checked.", min=0)
    eval_every: int = option(
        100, "Check the rule every N SFT steps (a resumable progress checkpoint is written then too).", min=1
    )
    eval_samples: int = option(100, "Validation samples per check (greedy exact match).", min=1)
    threshold: float = option(
        0.4,
        "Warm start = the first checked step whose validation accuracy reaches this (above 1: never, so the "
        "best checked step); if none does by train.sft.max_steps, the best checked step.",
        min=0,
    )


@dataclass
class EvaluationConfig:
    pass_k: int = option(8, "k of pass@k at the warm start.", min=1)
    pass_samples: int = option(200, "Held-out samples for pass@k.", min=0)
    pass_temperature: float = option(1.0, "Sampling temperature of pass@k.", min=0)


@dataclass
class ScreenConfig:
    """real profile: the offline screen of GRPO's training prompts by the warm start (`screen` stage)."""

    enabled: bool = option(
        False,
        "Sample k answers per training prompt from the warm start at GRPO's temperature and completion "
        "budget, score them with the binary reward, and train GRPO only on the prompts with mixed results "
        "(the efficiency paper's policy-based filter, offline). Off: GRPO trains on every training prompt.",
    )
    k: int = option(0, "Answers per prompt (0 = train.grpo.num_generations, GRPO's group size).", min=0)
    batch_size: int = option(8, "Prompts per generation call.", min=1)
    irrelevance_variants: float = option(
        0.0,
        "Share of the kept prompts with a call that GRPO also gets as an irrelevance variant: the same "
        "single-turn request with the called tools removed from the offered ones, whose right answer is no "
        "call (BFCL's irrelevance case; `tooltune data prepare --irrelevance-augment`'s variant and draw). "
        "Without them GRPO trains on calls almost alone and stops abstaining.",
        min=0,
        max=1,
    )


@dataclass
class RealDataConfig:
    """Training data of the `real` profile: a `tooltune data prepare` source, split by tool domain."""

    source: str = option("toolrl", "Data source of `tooltune data prepare` (tooltune.data.sources).")
    input: str = option(
        "package", "The source's input file or folder (`package`: the copy that ships with tooltune, for "
        "toolrl)."
    )
    decontaminate: bool = option(
        True,
        "Drop training samples whose user turns copy a user turn of BFCL, API-Bank or ACEBench (`tooltune "
        "data prepare --decontaminate`; the counts per benchmark are in the data stage's result).",
    )
    eval_data: str = option(
        "", "Folder holding apibank/ and acebench/ for decontamination (empty = $TOOLTUNE_DATA_DIR); BFCL's "
        "turns come with bfcl-eval."
    )
    unseen_fraction: float = option(
        0.1,
        "Share of samples held out by tool domain (tools sharing a name with no training sample): the "
        "unseen-tools check.",
        min=0,
        max_exclusive=1,
    )
    val_samples: int = option(
        24, "Samples of the training domains kept out of training for the SFT checks and GRPO's curve.", min=1
    )
    min_train: int = option(300, "Refuse to run with fewer SFT samples than this after the splits.", min=1)
    no_call_samples: bool = option(
        True, "Keep the source's answers without calls (a question back, a refusal) as no-call samples."
    )
    limit: int = option(0, "Read at most this many records of the source (0 = all; smoke tests).", min=0)


@dataclass
class BenchmarksConfig:
    """The official benchmarks of the `real` profile, run on every checkpoint (`tooltune eval`'s runner)."""

    suites: dict = option(
        {"bfcl": "non_live,live", "apibank": "level-1,level-2", "acebench": "normal"},
        "Benchmark -> comma-separated categories or groups (acebench: `normal` = every normal_* category).",
    )
    subset: dict = option(
        {"bfcl": 17, "apibank": 100, "acebench": 17},
        "Benchmark -> at most this many entries of each category (0 = all), a fixed stratified subset "
        "(`tooltune eval --subset`).",
    )
    subset_seed: int = option(0, "Seed of the subsets (the same entries for every checkpoint and run).")
    headline: dict = option(
        {"bfcl": "table2.non_live.overall,table2.live.overall,leaderboard.hallucination,table2.overall",
         "apibank": "categories.level-1.accuracy,categories.level-2.accuracy,overall",
         "acebench": "groups.normal"},
        "Benchmark -> comma-separated score keys of summary.json shown in the report's main table and "
        "compared between checkpoints (every category accuracy is reported too).",
    )
    template: str = option(
        "",
        "Prompt template of the evaluations (empty = train.data.template). For a model whose chat template "
        "has no tool format: tool_n1 (the template it is trained on) or bfcl (BFCL's prompt-based format).",
    )
    max_new_tokens: int = option(256, "New tokens per answer (greedy).", min=1)
    batch_size: int = option(8, "Prompts per generation batch.", min=1)
    data_dir: str = option("", "Folder holding apibank/ and acebench/ (empty = $TOOLTUNE_DATA_DIR).")


@dataclass
class QuickstartConfig:
    """One quickstart run. Greedy evaluations use train.diagnostics.eval_max_new_tokens and
    eval_batch_size; prompts and answers use train.data.template."""

    seed: int = option(
        0, "Seed of everything: the task, the model's initial weights, SFT row order, rollouts."
    )
    threads: int = option(
        2,
        "torch CPU threads. 2 suits an unshared 2-core machine; use 1 when other jobs share the cores "
        "(two spinning OpenMP threads under contention made an SFT step 4x slower).",
        min=1,
    )
    clock: str = option(
        "cpu",
        "Clock of the equal-compute comparison: continued SFT gets GRPO's training time on it. cpu = this "
        "process's CPU time (all threads; unchanged by other jobs on the machine), wall = elapsed time "
        "(what a user waits; depends on the machine's load).",
        ("cpu", "wall"),
    )
    profile: str = option(
        "synthetic",
        "synthetic: a tiny model built here on the synthetic task; real: a model folder (`model`) trained on "
        "real data (`real_data`) and scored on the official benchmarks (`benchmarks`).",
        ("synthetic", "real"),
    )
    model: str = option(
        "models/smollm2-135m-instruct",
        "real profile: the model folder every stage starts from (`make smollm2` writes the default).",
    )
    model_size: str = option("quickstart", "Tiny model size (tooltune.models.SIZES).", tuple(SIZES))
    task: TaskConfig = section(TaskConfig, "The synthetic task (tooltune.data.synthetic.quickstart_task).")
    warm_start: WarmStartConfig = section(WarmStartConfig, "Which SFT checkpoint GRPO starts from.")
    evaluation: EvaluationConfig = section(EvaluationConfig, "Evaluations beyond greedy exact match.")
    real_data: RealDataConfig = section(RealDataConfig, "real profile: the training data and its splits.")
    benchmarks: BenchmarksConfig = section(
        BenchmarksConfig, "real profile: the benchmarks and their subsets."
    )
    screen: ScreenConfig = section(
        ScreenConfig, "real profile: which training prompts GRPO gets, screened by the warm start."
    )
    train: TrainConfig = section(
        TrainConfig, "SFT (with the warm-start rule) and GRPO, as `tooltune train` reads them."
    )

    def validate(self) -> QuickstartConfig:
        """Refuse derived keys set by hand, and settings the pipeline cannot run."""
        fresh = QuickstartConfig()
        for key, what in DERIVED.items():
            if _get(self, key) != _get(fresh, key):
                raise ConfigError(f"{key}: set by {what}; remove it")
        self.train.validate()
        if self.profile == "real":
            unknown = set(self.benchmarks.subset) - set(self.benchmarks.suites)
            if unknown:
                raise ConfigError(
                    f"benchmarks.subset: {', '.join(sorted(unknown))} is not in benchmarks.suites"
                )
        if self.task.multi_step and self.train.reward.require_format:
            raise ConfigError(
                "train.reward.require_format: the multi-step task is scored on tool-call correctness "
                "only; set it to false with task.multi_step"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def identity(self) -> dict[str, Any]:
        """What a quickstart run folder records in run.json: the command and these settings as they read
        back from JSON (tuples become lists), so a resume or a branch compares like with like."""
        return {"command": "quickstart", "config": json.loads(json.dumps(self.to_dict()))}

    @classmethod
    def default_identity(cls) -> dict[str, Any]:
        """`identity()` of the defaults: a run folder made before a setting existed is the same run when
        this one holds that setting at its default (`rundir.differences`)."""
        return cls().identity()


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def read_settings(path: str | Path, depth: int = 0) -> dict[str, Any]:
    """The mapping of a quickstart YAML file, with the file its `extends:` names (relative to it) below."""
    data = config_mechanism.read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if depth > 4:
        raise ConfigError(f"extends: chain too deep at {path}")
    return _merge(read_settings(Path(path).parent / str(parent), depth + 1), data)


def load_config(
    path: str | Path | None = DEFAULT_CONFIG, overrides: dict[str, Any] | list[str] | None = None
) -> QuickstartConfig:
    """The settings of a quickstart YAML file (None: the dataclass defaults) with dotted overrides."""
    base = read_settings(path) if path else None
    return config_mechanism.load(QuickstartConfig, None, overrides, base=base)
