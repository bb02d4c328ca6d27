"""A run folder of the experiment pipeline, and the profile that fills it.

A folder is one run: `run.json` holds its identity (the command and the resolved settings), so the same
settings resume it and other settings are refused, naming each difference (`rundir.RunMismatch`); only
one process writes it at a time (`rundir.RunLock`). Its contents:

  config.yaml        the resolved settings
  train.yaml         the `train:` section with the folder's paths (`tooltune train --config` runs it)
  stages/<stage>.json  each finished stage's result, written atomically
  data/<split>.jsonl   the profile's data splits
  models/<name>      checkpoints (base, sft, sft_continued, progress checkpoints); grpo/ the GRPO run
  evals/             benchmark runs of the real profile
  branch.json        in a folder branched from another run (`tooltune.experiment.branch`)

`Profile` is what a profile runs: its stages and the function of each. Stage functions receive the
`RunFolder` they write into; `tooltune.experiment.pipeline.Pipeline` is the RunFolder that runs them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune import config as config_mechanism
from tooltune.experiment.config import QuickstartConfig
from tooltune.rundir import RunLock, check_identity, write_identity
from tooltune.schema import Sample, read_jsonl
from tooltune.training.config import TrainConfig


@dataclass(frozen=True)
class Profile:
    """What a profile runs: its stages in order, the function of each, the line announcing and the line
    summing up each, the data splits its stages read, and its report writer."""

    stages: tuple[str, ...]
    functions: Mapping[str, Callable[[RunFolder], dict[str, Any]]]
    descriptions: Mapping[str, str]
    headline: Callable[[str, dict[str, Any]], str]
    splits: tuple[str, ...]
    report: Callable[..., dict[str, Any]]
    """(out, config, results, notes=lines) -> the report, written into out."""


class RunFolder:
    """The folder `out` of one run of `profile` under the settings `cfg`; `say` prints the story (the CLI
    passes print, tests a no-op). Opening it checks its identity and writes config.yaml."""

    def __init__(self, out: str | Path, cfg: QuickstartConfig, say: Callable[[str], None], profile: Profile):
        self.out, self.cfg, self.say, self.profile = Path(out), cfg, say, profile
        # A folder is one run: the same settings resume it, other settings are refused naming each
        # difference (rundir.RunMismatch), and only one process writes it at a time (run() holds the lock).
        identity = cfg.identity()
        with RunLock(self.out):
            if not check_identity(self.out, identity, resume=True, defaults=cfg.default_identity()):
                write_identity(self.out, identity)
            (self.out / "stages").mkdir(parents=True, exist_ok=True)
            config_mechanism.dump(cfg, self.out / "config.yaml")
        self._splits: dict[str, list[Sample]] | None = None

    def stage_file(self, name: str) -> Path:
        return self.out / "stages" / f"{name}.json"

    def done(self, name: str) -> bool:
        return self.stage_file(name).is_file()

    def result(self, name: str) -> dict[str, Any]:
        return json.loads(self.stage_file(name).read_text())

    def _finish(self, name: str, result: dict[str, Any]) -> dict[str, Any]:
        tmp = self.stage_file(name).with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(self.stage_file(name))  # atomic: a stage is finished or not, never half-written
        return result

    def model_dir(self, name: str) -> Path:
        """Where a stage's model lives: models/<name>, the GRPO run's final/ for "grpo"; the `model` folder
        for "base" under the real profile."""
        if name == "base" and self.cfg.profile == "real":
            return Path(self.cfg.model)
        return self.out / "grpo" / "final" if name == "grpo" else self.out / "models" / name

    def screened_train(self) -> Path:
        """The training prompts GRPO gets when the screen stage is on (`tooltune.experiment.screen`)."""
        return self.out / "screen" / "grpo_train.jsonl"

    def splits(self) -> dict[str, list[Sample]]:
        if self._splits is None:
            self._splits = {k: read_jsonl(str(self.out / "data" / f"{k}.jsonl")) for k in self.profile.splits}
        return self._splits

    def train_config(self, stage: str) -> TrainConfig:
        """The `train:` section with the run folder's paths: stage "sft", "grpo" or "reproduce".

        "reproduce" is SFT then GRPO from the base model, SFT stopped at the chosen warm start with
        the same warm-up steps: what `tooltune train --config DIR/train.yaml` runs."""
        t = copy.deepcopy(self.cfg.train)
        t.name = t.name or "quickstart"
        t.run.seed = self.cfg.seed
        t.data.train = str(self.out / "data" / "train.jsonl")
        t.data.val = str(self.out / "data" / "val.jsonl")
        t.model.name_or_path = str(self.model_dir("base"))
        t.run.output_dir = str(self.out / "grpo")
        t.sft.enabled, t.grpo.enabled = stage in ("sft", "reproduce"), stage in ("grpo", "reproduce")
        if stage == "grpo":
            t.model.name_or_path = str(self.model_dir("sft"))
            if self.cfg.profile == "real" and self.cfg.screen.enabled:
                t.data.train = str(self.screened_train())
        if stage == "reproduce":
            chosen = self.result("sft")["chosen_step"]
            warmup = round(t.sft.max_steps * t.sft.warmup_ratio) if t.sft.max_steps > 0 else 0
            t.sft.max_steps = chosen
            t.sft.warmup_ratio = min(warmup, chosen - 1) / chosen if chosen > 1 else 0.0
            t.run.output_dir = str(self.out / "reproduce")
        return t
