"""The GRPO stage of a training run: tooltune's TRL trainer built from one resolved run and trained.

`GrpoStage(run, model_path, reward_funcs, checkpoint).train()` loads the model to train (the base
model, or the SFT warm start), builds the trainer (`grpo_args`: the `grpo` and `run` sections as TRL's
`GRPOConfig`; `selection_kwargs`: filtering and down-sampling), the agentic rollout when episodes are
trained, the callbacks (metrics, held-out evaluation, divergence guard, progress), trains, saves the
final model and returns the stage's summary entries. `training.runner.train` resolves the run and
finds the checkpoint to resume from.
"""

from __future__ import annotations

import os
from typing import Any

from transformers.trainer_callback import PrinterCallback, ProgressCallback
from trl import GRPOConfig

from tooltune.integrations.trl.reward import TRLRewardFunction
from tooltune.training import lora
from tooltune.training.agentic import AgenticRollout, EpisodeScorer
from tooltune.training.config import ConfigError, TrainConfig, build_reward
from tooltune.training.data import drop_long_prompts, rows_dataset
from tooltune.training.diagnostics import (
    HeldOutEval,
    MetricsLogger,
    RegionTagger,
    StepProgress,
    TrainingClock,
    read_metrics,
    truncate_metrics,
)
from tooltune.training.grpo import ToolTuneGRPOTrainer
from tooltune.training.guard import DivergenceGuard
from tooltune.training.resolved_run import ResolvedRun, Rows
from tooltune.training.selection import PromptFilter
from tooltune.training.update_plan import UpdatePlan, plan_for_run


def grpo_args(
    cfg: TrainConfig, output_dir: str, cpu: bool, processes: int = 1, checkpointing: bool | None = None
) -> Any:
    """Translate the `grpo` and `run` sections to TRL's GRPOConfig (papers' batch = prompts per step);
    `checkpointing` (the run's `update_plan`) overrides `run.gradient_checkpointing` when given."""
    g, r = cfg.grpo, cfg.run
    checkpointing = r.gradient_checkpointing if checkpointing is None else checkpointing
    n, per_dev = g.num_generations, g.per_device_batch_size
    ppu = g.prompts_per_update or g.prompts_per_step
    per_update, per_gen = ppu * n, g.prompts_per_step * n
    if per_update % (per_dev * processes):
        raise ConfigError(
            f"grpo.per_device_batch_size: prompts_per_update x num_generations ({per_update}) must be "
            f"divisible by per_device_batch_size x processes ({per_dev} x {processes})"
        )
    return GRPOConfig(
        output_dir=output_dir,
        seed=g.seed if g.seed >= 0 else r.seed,
        num_generations=n,
        per_device_train_batch_size=per_dev,
        gradient_accumulation_steps=per_update // (per_dev * processes),
        steps_per_generation=per_gen // (per_dev * processes),
        num_train_epochs=g.epochs,
        max_steps=g.max_steps,
        learning_rate=g.learning_rate,
        lr_scheduler_type=g.lr_scheduler,
        warmup_steps=g.warmup_ratio,
        weight_decay=g.weight_decay,
        max_grad_norm=g.max_grad_norm,
        temperature=g.temperature,
        top_p=g.top_p,
        top_k=g.top_k,
        max_completion_length=g.max_completion_length,
        beta=g.beta,
        epsilon=g.epsilon,
        epsilon_high=g.epsilon_high or None,
        loss_type=g.loss_type,
        scale_rewards=g.scale_rewards,
        entropy_coef=g.entropy_coef,
        num_iterations=g.num_iterations,
        mask_truncated_completions=g.mask_truncated_completions,
        use_vllm=g.use_vllm,
        vllm_mode=g.vllm_mode,
        vllm_gpu_memory_utilization=g.vllm_gpu_memory_utilization,
        **({"vllm_server_base_url": g.vllm_server_base_url} if g.vllm_server_base_url else {}),
        save_strategy="steps",
        save_steps=r.save_steps,
        save_total_limit=r.save_total_limit,
        logging_steps=r.logging_steps,
        report_to=list(r.report_to) or "none",
        log_completions=r.log_completions,
        use_cpu=cpu,
        bf16=r.bf16 and not cpu,
        gradient_checkpointing=checkpointing and (not cpu or g.cpu_gradient_checkpointing),
    )


def build_reward_funcs(cfg: TrainConfig) -> list[Any]:
    """The config's reward composition (`training.config.build_reward`, the one construction that
    `TrainConfig.validate` also checks) behind its TRL adapter, which logs every component."""
    return [TRLRewardFunction(build_reward(cfg.reward, cfg.answer_template()))]


def selection_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """ToolTuneGRPOTrainer's filtering and down-sampling arguments from `cfg.filter` and `cfg.downsample`."""
    f, ds = cfg.filter, cfg.downsample
    return {
        "prompt_filter": PromptFilter(k=f.k, max_reward=f.max_reward, reset_after_skip=f.reset_after_skip)
        if f.enabled
        else None,
        "downsample_m": ds.m if ds.enabled else None,
        "drop_zero_variance": ds.enabled and ds.drop_zero_variance,
        "advantage_mode": ds.advantage,
        "shared_prefix": cfg.grpo.shared_prefix,
        "shared_prefix_path": cfg.grpo.shared_prefix_path,
        "rollout_path": cfg.grpo.rollout_path,
        "lm_head_tokens": cfg.grpo.cpu_lm_head_tokens,
    }


class GrpoStage:
    """GRPO on one resolved run, from `model_path`, resuming from `checkpoint` (a complete checkpoint of
    `run_dir/grpo`, or None to start from the beginning)."""

    def __init__(
        self, run: ResolvedRun, model_path: str, reward_funcs: list[Any], checkpoint: str | None = None
    ) -> None:
        self.run = run
        self.cfg = run.config
        self.model_path = model_path
        self.reward_funcs = reward_funcs
        self.checkpoint = checkpoint
        self.out_dir = run.run_dir / "grpo"

    def train(self) -> dict[str, Any]:
        """Train and save the final model (`run_dir/final`); return the stage's summary entries
        (`prompts_dropped_too_long`, `update_plan`, `grpo`)."""
        model, tok = self.run.load_model(self.model_path)
        self.run.check_chat_template(tok, self.run.rows)
        rows, dropped = drop_long_prompts(list(self.run.rows), tok, self.cfg.data.max_prompt_tokens)
        summary: dict[str, Any] = {"prompts_dropped_too_long": dropped}
        step = int(self.checkpoint.rsplit("-", 1)[1]) if self.checkpoint else 0
        truncate_metrics(self.run.metrics, "grpo", step)  # a resumed stage logs again from its checkpoint
        clock = self.clock()
        rollout, scorer = self.agentic()
        # activation checkpointing from a memory estimate
        plan = plan_for_run(self.cfg, model, tok, rows, self.run.cpu)
        summary["update_plan"] = plan.to_dict()
        trainer = self.trainer(model, tok, rows, plan, rollout)
        heldout = self.add_callbacks(trainer, clock, scorer)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        trainer.train(resume_from_checkpoint=self.checkpoint)
        self.save(trainer, tok)
        summary["grpo"] = self.summary(trainer, heldout)
        return summary

    def clock(self) -> TrainingClock:
        """The training clock, continuing from the checkpoint's metrics when the stage resumes."""
        earlier = read_metrics(self.run.metrics, "grpo")
        return TrainingClock(
            max((r.get("train_s", 0.0) for r in earlier), default=0.0),
            max((r.get("train_cpu_s", 0.0) for r in earlier), default=0.0),
        )

    def agentic(self) -> tuple[dict[str, Any], EpisodeScorer | None]:
        """The trainer's agentic arguments (TRL's ``rollout_func``: episodes on the environments) and the
        held-out episode scorer; nothing and None when the stage trains single completions."""
        ag, cfg = self.cfg.agentic, self.cfg
        if not ag.enabled:
            return {}, None
        settings, template = cfg.environment_settings(), self.run.template
        rollout = AgenticRollout(template, ag.max_turns, ag.budget(cfg.grpo.max_completion_length),
                                 ag.environment, settings)
        scorer = EpisodeScorer(template, ag.max_turns, cfg.diagnostics.eval_max_new_tokens,
                               cfg.diagnostics.eval_batch_size, ag.environment, settings)
        return {"rollout_func": rollout}, scorer

    def trainer(self, model: Any, tok: Any, rows: Rows, plan: UpdatePlan, rollout: dict[str, Any]
                ) -> ToolTuneGRPOTrainer:
        """tooltune's GRPO trainer on `rows`, with the engine versions already checked by `runner.train`."""
        cfg = self.cfg
        entropy_split = cfg.diagnostics.entropy_split and not cfg.agentic.enabled
        return ToolTuneGRPOTrainer(
            model=model,
            reward_funcs=self.reward_funcs,
            args=grpo_args(cfg, str(self.out_dir), self.run.cpu, self.run.processes, plan.checkpointing),
            peft_config=lora.peft_config(cfg.model.lora, model),  # LoRA: reference = the adapter disabled
            train_dataset=rows_dataset(rows),
            processing_class=tok,
            **selection_kwargs(cfg),
            region_fn=RegionTagger(tok, self.run.template) if entropy_split else None,
            engine_checked=True,
            **rollout,
        )

    def add_callbacks(self, trainer: ToolTuneGRPOTrainer, clock: TrainingClock,
                      scorer: EpisodeScorer | None) -> HeldOutEval:
        """Metrics, held-out evaluation, the divergence guard and the progress bar in place of TRL's
        printing; returns the held-out evaluation, whose history the summary reports."""
        g, dg = self.cfg.grpo, self.cfg.diagnostics
        metrics = self.run.metrics
        trainer.add_callback(MetricsLogger(metrics, "grpo", g.max_seconds, clock, g.max_seconds_clock))
        heldout = HeldOutEval(trainer, self.run.val_rows, self.run.template, dg.eval_every,
                              dg.eval_max_new_tokens, dg.eval_batch_size, clock, scorer)
        trainer.add_callback(heldout)
        if g.stop_on_divergence:
            trainer.add_callback(DivergenceGuard(trainer, prompts_per_step=g.prompts_per_update
                                                 or g.prompts_per_step))
        trainer.remove_callback(PrinterCallback)  # these print every log record; the file holds them
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(StepProgress("grpo", g.max_seconds, clock, g.max_seconds_clock))
        return heldout

    def save(self, trainer: ToolTuneGRPOTrainer, tok: Any) -> None:
        """The trained model and tokenizer in `run_dir/final` (LoRA: the adapter, and the merged model in
        final/merged), written by the main process."""
        if trainer.accelerator.is_main_process:
            final = self.run.run_dir / "final"
            trainer.save_model(str(final))
            tok.save_pretrained(final)
            lora.save_merged(trainer.accelerator.unwrap_model(trainer.model), tok, final)

    def summary(self, trainer: ToolTuneGRPOTrainer, heldout: HeldOutEval) -> dict[str, Any]:
        """The stage's entry of summary.json: steps, the checkpoint resumed from, the held-out history,
        the filter's state and why training stopped early (None when it ran to its planned end)."""
        tt = trainer.tooltune
        return {
            "steps": trainer.state.global_step,
            "resumed_from": self.checkpoint,
            heldout.key.removeprefix("tooltune/"): heldout.history,
            "filter": tt.prompt_filter.state_dict() if tt.prompt_filter else None,
            "stopped_early": tt.stop_reason,
        }
