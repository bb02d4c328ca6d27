"""The quickstart pipeline: build model -> synthetic data -> SFT warm start -> GRPO -> evaluations -> report.

Every stage writes `DIR/stages/<stage>.json` when it finishes; running again skips finished stages, so
an interrupted run resumes from the last finished stage (models live in `DIR/models/<stage>`).

Stages (`STAGES`):
  data           task splits as canonical JSONL (train, val, heldout >= 1,000, unseen_tools)
  model          tiny Qwen2 + tokenizer trained on the rendered training texts
  sft            SFT on the (imperfect) demonstrations; the warm start is the first checkpoint whose
                 greedy validation accuracy reaches `warm_threshold` (chosen by measurement: the
                 phase change moves by ~100 steps between seeds)
  eval_sft       greedy held-out + unseen-tools accuracy, pass@k on a held-out subset
  grpo           GRPO with the binary reward and reasoning format (tooltune.training's TRL trainer)
  eval_grpo      the same evaluations after GRPO
  sft_continued  SFT resumed from the warm start for the same wall time GRPO trained (fair baseline)
  eval_sft_continued
"""

from __future__ import annotations

import json
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tooltune.quickstart.task import TaskConfig

logger = logging.getLogger(__name__)

STAGES = ("data", "model", "sft", "eval_sft", "grpo", "eval_grpo", "sft_continued", "eval_sft_continued")


@dataclass
class QuickstartConfig:
    """Sizes and hyper-parameters of one quickstart run (`BUDGETS` holds the presets)."""

    seed: int = field(default=0, metadata={"help": "seed of data, model init, SFT order and rollouts"})
    threads: int = field(
        default=2,
        metadata={
            "help": "torch CPU threads; 2 fits the 15-minute budget on an unshared 2-core machine; use 1 "
            "when other jobs share the cores (spinning OpenMP threads under contention made 2 threads 4x "
            "slower per step)"
        },
    )
    n_train: int = field(default=6000, metadata={"help": "training samples"})
    n_val: int = field(default=200, metadata={"help": "validation samples (warm-start choice, GRPO curve)"})
    n_heldout: int = field(default=1000, metadata={"help": "held-out samples (>= 1,000 for the report)"})
    n_unseen: int = field(default=300, metadata={"help": "held-out samples with tools never trained on"})
    enum_noise: float = field(default=0.7, metadata={"help": "see TaskConfig.enum_noise"})
    parallel_drop: float = field(default=0.6, metadata={"help": "see TaskConfig.parallel_drop"})
    multi_step: bool = field(
        default=False,
        metadata={"help": "multi-step task (tool results in the history) instead of the single-turn one"},
    )
    model_size: str = field(default="quickstart", metadata={"help": "tooltune.models.SIZES key"})
    sft_batch: int = field(default=16, metadata={"help": "SFT sequences per step"})
    sft_lr: float = field(default=2e-3, metadata={"help": "SFT learning rate (constant after warm-up)"})
    sft_max_steps: int = field(default=2000, metadata={"help": "SFT gives up choosing after this many steps"})
    sft_min_steps: int = field(
        default=500, metadata={"help": "first step at which the warm start is checked"}
    )
    sft_eval_every: int = field(default=100, metadata={"help": "check the warm-start rule every N steps"})
    sft_eval_samples: int = field(default=100, metadata={"help": "validation samples per check"})
    warm_threshold: float = field(
        default=0.4,
        metadata={"help": "warm start = first checkpoint whose greedy validation accuracy reaches this"},
    )
    grpo_steps: int = field(default=120, metadata={"help": "GRPO optimizer steps"})
    grpo_prompts: int = field(default=8, metadata={"help": "prompts per GRPO step"})
    grpo_generations: int = field(default=8, metadata={"help": "rollouts per prompt (n)"})
    grpo_lr: float = field(
        default=5e-4,
        metadata={
            "help": "GRPO learning rate; 1e-3 collapsed onto always answering [] in the feasibility trial"
        },
    )
    grpo_temperature: float = field(default=1.0, metadata={"help": "rollout temperature"})
    grpo_eval_every: int = field(default=20, metadata={"help": "validation accuracy every N GRPO steps"})
    max_new_tokens: int = field(default=72, metadata={"help": "longest completion (rollouts and evaluation)"})
    pass_k: int = field(default=8, metadata={"help": "k of pass@k at the warm start"})
    pass_samples: int = field(default=200, metadata={"help": "held-out samples for pass@k"})
    eval_batch: int = field(default=64, metadata={"help": "prompts per generation batch in evaluation"})

    def task(self) -> TaskConfig:
        return TaskConfig(
            seed=self.seed,
            n_train=self.n_train,
            n_val=self.n_val,
            n_heldout=self.n_heldout,
            n_unseen=self.n_unseen,
            enum_noise=self.enum_noise,
            parallel_drop=self.parallel_drop,
        )


BUDGETS: dict[str, dict[str, Any]] = {
    "default": {},
    # Minutes-long smoke run (tests, CI): tiny sizes, same code path.
    "mini": {
        "n_train": 200,
        "n_val": 16,
        "n_heldout": 24,
        "n_unseen": 12,
        "model_size": "test",
        "sft_batch": 8,
        "sft_max_steps": 6,
        "sft_min_steps": 3,
        "sft_eval_every": 3,
        "sft_eval_samples": 8,
        "warm_threshold": 1.1,
        "grpo_steps": 2,
        "grpo_prompts": 2,
        "grpo_generations": 4,
        "grpo_eval_every": 1,
        "max_new_tokens": 24,
        "pass_k": 8,
        "pass_samples": 8,
        "eval_batch": 16,
    },
}


def make_config(budget: str = "default", **overrides: Any) -> QuickstartConfig:
    if budget not in BUDGETS:
        raise ValueError(f"unknown quickstart budget {budget!r}; choose one of {sorted(BUDGETS)}")
    known = {f.name for f in fields(QuickstartConfig)}
    bad = sorted(set(overrides) - known)
    if bad:
        raise ValueError(f"unknown quickstart setting(s) {bad}; known: {sorted(known)}")
    return QuickstartConfig(**{**BUDGETS[budget], **overrides})


class Pipeline:
    """Runs the stages in `out`; `say` prints the story (the CLI passes print, tests a no-op)."""

    def __init__(self, out: str | Path, cfg: QuickstartConfig, say: Callable[[str], None] = print):
        self.out, self.cfg, self.say = Path(out), cfg, say
        (self.out / "stages").mkdir(parents=True, exist_ok=True)
        cfg_file = self.out / "config.json"
        if cfg_file.is_file():
            old = json.loads(cfg_file.read_text())
            if old != asdict(cfg):
                raise ValueError(
                    f"{self.out} holds a run with other settings ({cfg_file}); use another --out"
                )
        cfg_file.write_text(json.dumps(asdict(cfg), indent=2))
        self._splits: dict[str, Any] | None = None

    # ------------------------------------------------------------------ bookkeeping
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
        return self.out / "models" / name

    def splits(self) -> dict[str, Any]:
        if self._splits is None:
            from tooltune.schema import read_jsonl

            self._splits = {
                k: read_jsonl(str(self.out / "data" / f"{k}.jsonl"))
                for k in ("train", "val", "heldout", "unseen_tools")
            }
        return self._splits

    # ------------------------------------------------------------------ run
    def run(self, stop_after: str | None = None) -> dict[str, Any]:
        import torch

        from tooltune.quickstart import stages
        from tooltune.quickstart.task import register_template

        torch.set_num_threads(self.cfg.threads)
        register_template()
        t0 = time.perf_counter()
        for i, name in enumerate(STAGES, 1):
            if self.done(name):
                self.say(f"[{i}/{len(STAGES)}] {name}: already finished, skipping (resume)")
            else:
                self.say(f"[{i}/{len(STAGES)}] {name}: {stages.DESCRIPTIONS[name]}")
                torch.manual_seed(self.cfg.seed * 1000 + i)
                w, c = time.perf_counter(), time.process_time()
                res = getattr(stages, f"stage_{name}")(self)
                res["timing"] = {
                    "wall_s": time.perf_counter() - w,
                    "cpu_s": time.process_time() - c,
                    "loadavg_end": os.getloadavg()[0],
                }
                self._finish(name, res)
                self.say(f"    {stages.headline(name, res)}  ({res['timing']['wall_s']:.0f} s)")
            if name == stop_after:
                break
        from tooltune.quickstart.report import write_report

        report = write_report(self)
        report["timings"]["this_invocation_s"] = time.perf_counter() - t0
        return report


def environment() -> dict[str, Any]:
    """Versions and hardware for the report."""
    import torch
    import transformers
    import trl

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "processor": platform.processor() or platform.machine(),
    }
