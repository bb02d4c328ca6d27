"""GRPO for the quickstart and the efficiency benchmark, on the training engineer's TRL trainer.

`grpo_train` runs `tooltune.training.grpo.ToolTuneGRPOTrainer` (TRL GRPOTrainer + pre-rollout filtering
+ max-variance down-sampling) with the binary reward, and measures what the reports need: per step the
training wall time (rollout generation + policy update, excluding our own evaluations), the trainer's
diagnostics (reward, zero-variance share, rollout vs update time, rollouts and tokens), and greedy
validation accuracy every `eval_every` steps against the training clock.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tooltune.quickstart.task import TEMPLATE

if TYPE_CHECKING:
    from tooltune.quickstart.run import Pipeline, QuickstartConfig

logger = logging.getLogger(__name__)

LOG_KEYS = (
    "reward",
    "frac_reward_zero_std",
    "tooltune/zero_variance_share",
    "tooltune/all_correct_share",
    "tooltune/rollout_time",
    "tooltune/update_time",
    "tooltune/rollouts_generated",
    "tooltune/tokens_trained",
    "tooltune/rollouts_dropped",
    "tooltune/tokens_saved",
    "tooltune/prompts_skipped_epoch",
    "completions/mean_length",
    "entropy",
    "epoch",
)


@dataclass
class GRPOSettings:
    """One GRPO run: the knobs the quickstart and the efficiency benchmark vary."""

    steps: int = 100
    prompts: int = 16
    generations: int = 8
    lr: float = 3e-4
    temperature: float = 1.0
    max_new_tokens: int = 72
    seed: int = 0
    eval_every: int = 25
    wall_budget_s: float = 0.0  # > 0: stop once training wall time (evaluations excluded) reaches it
    filter_k: int = 0  # > 0: pre-rollout filtering with this k
    filter_reset: bool = False  # a skipped prompt returns one epoch later (re-checked, not dropped for good)
    downsample_m: int = 0  # > 0 and < generations: max-variance down-sampling to m rollouts
    advantage_mode: str = "kept"  # after down-sampling: "kept" (m-rollout statistics) or "full" (n-rollout)
    epochs: float = 1000.0  # the step or wall budget ends training, never the epoch count
    require_format: bool = True  # False: tool-call correctness only (the multi-turn recipe)

    @classmethod
    def from_config(cls, c: QuickstartConfig, **changes: Any) -> GRPOSettings:
        """The quickstart's GRPO settings; `changes` override fields (the benchmark's budget and knobs)."""
        base = {
            "steps": c.grpo_steps,
            "prompts": c.grpo_prompts,
            "generations": c.grpo_generations,
            "lr": c.grpo_lr,
            "temperature": c.grpo_temperature,
            "max_new_tokens": c.max_new_tokens,
            "seed": c.seed,
            "eval_every": c.grpo_eval_every,
            "require_format": not c.multi_step,  # multi-step task: tool-call correctness only
        }
        return cls(**{**base, **changes})


def _callback(trainer_ref: dict, val: list, settings: GRPOSettings, eval_batch: int) -> Any:
    from transformers import TrainerCallback

    from tooltune.generation import HFBackend
    from tooltune.quickstart import evaluate as ev

    class Clock(TrainerCallback):
        """Training clock, step log and validation curve (evaluation time kept off the clock)."""

        def __init__(self) -> None:
            self.train_s = self.train_cpu = 0.0
            self.t = self.c = 0.0
            self.steps: list[dict[str, Any]] = []
            self.curve: list[dict[str, Any]] = []

        def evaluate(self, step: int) -> None:
            tr = trainer_ref["trainer"]
            model = tr.accelerator.unwrap_model(tr.model)
            was = model.training
            model.eval()
            be = HFBackend(model=model, tokenizer=tr.processing_class, batch_size=eval_batch, name="curve")
            acc = ev.evaluate(be, val, TEMPLATE, settings.max_new_tokens)["accuracy"]
            model.train(was)
            self.curve.append({"step": step, "train_s": self.train_s, "accuracy": acc})

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            from tqdm import tqdm

            budget = f", {settings.wall_budget_s:.0f} s budget" if settings.wall_budget_s else ""
            self.bar = tqdm(
                total=None if settings.wall_budget_s else settings.steps, desc=f"GRPO{budget}", unit="step"
            )
            if val and settings.eval_every:
                self.evaluate(0)

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.bar.close()

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t, self.c = time.perf_counter(), time.process_time()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.train_s += time.perf_counter() - self.t
            self.train_cpu += time.process_time() - self.c
            if settings.wall_budget_s and self.train_s >= settings.wall_budget_s:
                control.should_training_stop = True
            if (
                val
                and settings.eval_every
                and (
                    state.global_step % settings.eval_every == 0
                    or control.should_training_stop
                    or state.global_step >= settings.steps
                )
            ):
                self.evaluate(state.global_step)

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
            if logs and "reward" in logs:
                rec = {"step": state.global_step, "train_s": self.train_s}
                rec.update({k: float(v) for k, v in logs.items() if k in LOG_KEYS})
                self.steps.append(rec)
                self.bar.update(state.global_step - self.bar.n)
                acc = f"{self.curve[-1]['accuracy']:.2f}" if self.curve else "-"
                self.bar.set_postfix(reward=f"{rec['reward']:.2f}", val=acc)

    return Clock()


def grpo_train(
    model_dir: str | Path,
    out_dir: str | Path,
    train: list,
    val: list,
    settings: GRPOSettings,
    eval_batch: int = 64,
) -> dict[str, Any]:
    """Run GRPO from `model_dir`, save the policy to `out_dir`, return the measurements."""
    import os

    from datasets import Dataset

    from tooltune.models import load_model_and_tokenizer
    from tooltune.training.config import TrainConfig
    from tooltune.training.data import grpo_rows
    from tooltune.training.grpo import ToolTuneGRPOTrainer
    from tooltune.training.runner import build_reward_funcs, grpo_args, selection_kwargs

    s = settings
    cfg = TrainConfig(name="quickstart")
    g = cfg.grpo
    g.num_generations, g.prompts_per_step, g.per_device_batch_size = (
        s.generations,
        s.prompts,
        s.prompts * s.generations,
    )
    g.learning_rate, g.temperature, g.max_completion_length = s.lr, s.temperature, s.max_new_tokens
    g.max_steps, g.epochs, g.top_k = s.steps, s.epochs, 0
    cfg.run.seed, cfg.run.save_steps, cfg.run.logging_steps = s.seed, 10**9, 1
    cfg.data.template = cfg.reward.template = TEMPLATE
    cfg.reward.require_format = s.require_format
    cfg.filter.enabled, cfg.filter.k, cfg.filter.reset_after_skip = s.filter_k > 0, s.filter_k, s.filter_reset
    ds = cfg.downsample
    ds.enabled, ds.m, ds.advantage = 0 < s.downsample_m < s.generations, s.downsample_m, s.advantage_mode
    args = grpo_args(cfg, str(out_dir), cpu=True)
    args.save_strategy = "no"
    args.disable_tqdm = False
    model, tok = load_model_and_tokenizer(str(model_dir), dtype="float32")
    ref: dict[str, Any] = {}
    clock = _callback(ref, val, s, eval_batch)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    trainer = ToolTuneGRPOTrainer(
        model=model,
        reward_funcs=build_reward_funcs(cfg),
        args=args,
        train_dataset=Dataset.from_list(grpo_rows(train, TEMPLATE)),
        processing_class=tok,
        **selection_kwargs(cfg),
        callbacks=[clock],
    )
    ref["trainer"] = trainer
    # our own progress bar replaces the Trainer's, which prints every log record at logging_steps=1
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    t = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t
    trainer.save_model(str(out_dir))
    tok.save_pretrained(str(out_dir))

    def total(key: str) -> float:
        return sum(r.get(key, 0.0) for r in clock.steps)

    rewards = [r["reward"] for r in clock.steps if "reward" in r]
    k = max(1, len(rewards) // 10)
    return {
        "steps": trainer.state.global_step,
        "train_wall_s": clock.train_s,
        "train_cpu_s": clock.train_cpu,
        "stage_wall_s": wall,
        "rollout_s": total("tooltune/rollout_time"),
        "update_s": total("tooltune/update_time"),
        "rollouts_generated": total("tooltune/rollouts_generated"),
        "tokens_trained": total("tooltune/tokens_trained"),
        "rollouts_dropped": total("tooltune/rollouts_dropped"),
        "reward_first": sum(rewards[:k]) / k if rewards else float("nan"),
        "reward_last": sum(rewards[-k:]) / k if rewards else float("nan"),
        "log": clock.steps,
        "curve": clock.curve,
        "settings": {**s.__dict__},
    }


def run_grpo(p: Pipeline) -> dict[str, Any]:
    sp = p.splits()
    s = GRPOSettings.from_config(p.cfg)
    return grpo_train(p.model_dir("sft"), p.model_dir("grpo"), sp["train"], sp["val"], s, p.cfg.eval_batch)
