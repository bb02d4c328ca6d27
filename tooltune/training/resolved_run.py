"""One training run resolved once, before any work: its settings, its prompt template and its rows.

`resolve_config` gives the settings a run folder records (validated, template specs and the system
prompt resolved). `ResolvedRun.resolve` adds what the run trains on: the model's own format for a
``native`` template (read from the model's tokenizer), the training and validation rows, and the
checks of the model path and of the rows. `training.runner.train` resolves a run once and hands it to
each stage (`training.grpo_stage.GrpoStage`, the SFT stage); the stages load the models they train
through it (`load_model`, `check_chat_template`).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tooltune.models import load_model_and_tokenizer, load_tokenizer
from tooltune.prompts import PromptTemplate, check_history_reasoning, get_template, resolve_native
from tooltune.training.agentic import check_task_rows
from tooltune.training.config import ConfigError, TrainConfig, resolve_system_prompt, resolve_template
from tooltune.training.data import check_rows, config_grpo_rows, load_samples

Rows = list[dict[str, Any]]


def resolve_config(cfg: TrainConfig) -> TrainConfig:
    """A validated copy with template specs ("module:name") resolved to registered template names and
    `data.system_prompt` to its text: the settings a run records, so a resume compares resolved values."""
    cfg = copy.deepcopy(cfg.validate())
    cfg.data.template = resolve_template(cfg.data.template)
    if cfg.reward.template:
        cfg.reward.template = resolve_template(cfg.reward.template, "reward.template")
    cfg.data.system_prompt = resolve_system_prompt(cfg.data.system_prompt)
    return cfg


def on_cpu(cfg: TrainConfig) -> bool:
    """Whether the run trains on the CPU (`run.device` cpu, or auto without CUDA)."""
    return cfg.run.device == "cpu" or (cfg.run.device == "auto" and not torch.cuda.is_available())


def world_size() -> int:
    """Processes of this launch (torchrun / accelerate launch set WORLD_SIZE) before any state exists."""
    return int(os.environ.get("WORLD_SIZE", "1"))


@dataclass(frozen=True)
class ResolvedRun:
    """A run's settings and inputs, resolved and checked once (`resolve`).

    `config`: as `resolve_config` gives it and, for a ``native`` template, with the model's own format
    handed on in `config.data` (`PromptControls.with_template`; not a setting, so not recorded).
    `rows`: the training rows; `val_rows`: the validation rows (at most `diagnostics.eval_samples`).
    `cpu` and `processes`: where it trains (`on_cpu`, `world_size`)."""

    config: TrainConfig
    rows: Rows
    val_rows: Rows
    cpu: bool
    processes: int

    @classmethod
    def resolve(cls, cfg: TrainConfig, train_rows: Rows | None = None, val_rows: Rows | None = None
                ) -> ResolvedRun:
        """Resolve `cfg` (already `resolve_config`'d) with its rows: the ones given, else those of
        `data.train` and `data.val`. Data errors (missing ground truth, bad records) come before the
        model check, and no model is loaded for them, except for a ``native`` template, whose rows the
        model's tokenizer renders: its model is checked first. Each check runs once."""
        native = get_template(cfg.data.template).chat_tools
        if native:
            cfg = _with_model_format(cfg)
        d = cfg.data
        rows = train_rows if train_rows is not None else _file_rows(cfg, d.train, d.max_train_samples)
        check_rows(rows)
        if not rows:
            raise ConfigError("data.train: no training rows")
        if not native:  # after the data: a data error is reported first
            cfg.check_model()
        if val_rows is None and d.val:
            val_rows = _file_rows(cfg, d.val, d.max_val_samples, "data.val")
        val_rows = (val_rows or [])[: cfg.diagnostics.eval_samples]
        if cfg.agentic.enabled and cfg.grpo.enabled:  # before SFT: the episodes need tasks on both files
            check_task_rows(rows, "data.train", cfg.agentic.environment)
            check_task_rows(val_rows, "data.val", cfg.agentic.environment)
        return cls(cfg, rows, val_rows, on_cpu(cfg), world_size())

    @property
    def run_dir(self) -> Path:
        return Path(self.config.run.output_dir)

    @property
    def metrics(self) -> Path:
        """The run's metrics file: one record per logged step of every stage."""
        return self.run_dir / "metrics.jsonl"

    @property
    def template(self) -> PromptTemplate:
        """The template the completions are scored in (`TrainConfig.answer_template`)."""
        return self.config.answer_template()

    def load_model(self, path: str) -> tuple[Any, Any]:
        """The model and tokenizer at `path` as this run trains them (float32 on the CPU)."""
        m = self.config.model
        return load_model_and_tokenizer(path, dtype="float32" if self.cpu else m.dtype,
                                        trust_remote_code=m.trust_remote_code,
                                        attn_implementation=m.attn_implementation or None)

    def check_chat_template(self, tokenizer: Any, rows: Rows) -> None:
        """Refuse, before any step, a chat template that cannot render the tools of a template that hands
        them to it (``native``: `resolve_native`), and prompts that keep earlier reasoning
        (data.keep_reasoning, messages history) when the model's chat template drops it, as Qwen3's does:
        the model would train on none of it. Each stage checks the model it loads."""
        d = self.config.data
        resolve_native(tokenizer, d.template, where="data.template")
        if any(m.get("role") == "assistant" for r in rows for m in r.get("prompt") or ()):
            check_history_reasoning(tokenizer, d.prompt_template, d.keep_reasoning, d.history,
                                    where="data.keep_reasoning")


def _with_model_format(cfg: TrainConfig) -> TrainConfig:
    """`cfg` with the model's own format (a ``native`` template) resolved from the model's tokenizer and
    handed on in `cfg.data`: it renders the rows' history and writes SFT targets, rewards and rollouts
    (each stage checks the chat template of the model it loads again)."""
    cfg.check_model()
    tokenizer = load_tokenizer(cfg.model.name_or_path, cfg.model.trust_remote_code)
    cfg = copy.copy(cfg)
    cfg.data = cfg.data.with_template(resolve_native(tokenizer, cfg.data.template, where="data.template"))
    return cfg


def _file_rows(cfg: TrainConfig, path: str, limit: int, key: str = "data.train") -> Rows:
    return config_grpo_rows(cfg, load_samples(path, limit, key))
