"""Run a training config end to end: SFT warm start and/or GRPO, checkpoints, resume, final model.

Run directory layout (`run.output_dir`):
    config.yaml          the resolved config
    metrics.jsonl        one record per logged step: {"stage": "sft"|"grpo", "step", "train_s", ...}
    sft/checkpoint-N/    SFT checkpoints (engine torch: sft_state.pt written last; trl: tooltune_state.json)
    sft/final/           the warm-start model
    grpo/checkpoint-N/   GRPO checkpoints (tooltune_state.json holds filter state; written last)
    final/               the trained model + tokenizer
    summary.json         steps, held-out accuracy history, wall time

GRPO's training clock (`diagnostics.TrainingClock`) leaves held-out evaluations out: `grpo.max_seconds`
budgets, and `train_s` in the metrics measures, the time spent on rollouts, updates, logging and
checkpoints. `diagnostics.grpo_summary(run_dir / "metrics.jsonl")` reads back what a run measured.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from trl import GRPOConfig

from tooltune.integrations.trl.reward import TRLRewardFunction
from tooltune.models import load_model_and_tokenizer, load_tokenizer
from tooltune.prompts import check_history_reasoning, get_template, resolve_native
from tooltune.rundir import RunLock, check_identity, check_inputs, write_identity
from tooltune.training import lora
from tooltune.training.agentic import AgenticRollout, EpisodeScorer, check_task_rows
from tooltune.training.config import (
    ConfigError,
    TrainConfig,
    build_reward,
    dump_config,
    resolve_system_prompt,
    resolve_template,
)
from tooltune.training.data import (
    check_rows,
    config_grpo_rows,
    config_sft_rows,
    drop_long_prompts,
    load_samples,
    rows_dataset,
)
from tooltune.training.diagnostics import (
    HeldOutEval,
    MetricsLogger,
    RegionTagger,
    StepProgress,
    TrainingClock,
    read_metrics,
    truncate_metrics,
)
from tooltune.training.engine_fence import check_engine_versions
from tooltune.training.epoch_hooks import STATE_FILE
from tooltune.training.grpo import ToolTuneGRPOTrainer
from tooltune.training.guard import DivergenceGuard
from tooltune.training.resume import last_complete_checkpoint as resume_checkpoint
from tooltune.training.resume import run_inputs
from tooltune.training.selection import PromptFilter
from tooltune.training.sft import SFT_STATE, SFTLoop, run_sft_torch, run_sft_trl
from tooltune.training.update_plan import plan_for_run

logger = logging.getLogger(__name__)


def last_complete_checkpoint(
    folder: str | Path, markers: tuple[str, ...] = (STATE_FILE, "trainer_state.json")
) -> str | None:
    """Newest checkpoint-N holding every marker file (our state file is written last, so a kill
    mid-save is never picked) whose files are whole (`resume.verify_checkpoint`; a damaged newer one
    is skipped with a warning); `markers=(SFT_STATE,)` for the torch SFT loop's checkpoints."""
    return resume_checkpoint(folder, markers)


class _CheckpointMarker(TrainerCallback):
    """For trainers without our own state (SFT): mark a checkpoint complete after it is written."""

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                tmp = folder / (STATE_FILE + ".tmp")
                tmp.write_text(json.dumps({"global_step": state.global_step}), encoding="utf-8")
                tmp.replace(folder / STATE_FILE)


def on_cpu(cfg: TrainConfig) -> bool:
    return cfg.run.device == "cpu" or (cfg.run.device == "auto" and not torch.cuda.is_available())


def world_size() -> int:
    """Processes of this launch (torchrun / accelerate launch set WORLD_SIZE) before any state exists."""
    return int(os.environ.get("WORLD_SIZE", "1"))


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


def _load(cfg: TrainConfig, path: str, cpu: bool) -> tuple[Any, Any]:
    dtype = "float32" if cpu else cfg.model.dtype
    return load_model_and_tokenizer(path, dtype=dtype, trust_remote_code=cfg.model.trust_remote_code,
                                    attn_implementation=cfg.model.attn_implementation or None)


def _rows(cfg: TrainConfig, path: str, limit: int, key: str = "data.train") -> list[dict[str, Any]]:
    return config_grpo_rows(cfg, load_samples(path, limit, key))


def train(
    cfg: TrainConfig,
    resume: bool = False,
    reward_funcs: list[Any] | None = None,
    train_rows: list[dict[str, Any]] | None = None,
    val_rows: list[dict[str, Any]] | None = None,
) -> Path:
    """Run the enabled stages; with `resume`, continue from the last complete checkpoint of each stage.

    The run folder is one run: its settings and the content digests of its inputs (data files, model
    folder: `resume.run_inputs`) are recorded in `run.json`; `resume` continues only the same settings
    on the same inputs (`rundir.RunMismatch` names every difference, and each changed input with its
    file) and a finished run resumes to nothing; a folder holding results is refused without `resume`;
    one process writes it at a time (`rundir.RunFolderBusy`)."""
    check_engine_versions()  # the trainer overrides private TRL / transformers methods of these versions
    cfg = resolved(cfg.validate())
    if train_rows is None:
        cfg.check_data_files()
    run_dir = Path(cfg.run.output_dir)
    inputs = run_inputs(cfg, train_rows, val_rows)
    identity = {"command": "train", "config": cfg.to_dict(), "inputs": {k: d for k, (_, d) in inputs.items()}}
    if not _is_main():
        # Read-only, and only for other settings: the main process may be creating this very run.
        check_inputs(run_dir, inputs)
        check_identity(run_dir, identity, resume=True)
        return _train(cfg, resume, reward_funcs, train_rows, val_rows)
    with RunLock(run_dir):
        check_inputs(run_dir, inputs)  # a changed input named with its file, before the other fields
        if not check_identity(run_dir, identity, resume):
            write_identity(run_dir, identity)
        return _train(cfg, resume, reward_funcs, train_rows, val_rows)


def _train(
    cfg: TrainConfig,
    resume: bool,
    reward_funcs: list[Any] | None,
    train_rows: list[dict[str, Any]] | None,
    val_rows: list[dict[str, Any]] | None,
) -> Path:
    t_start = time.perf_counter()
    run_dir = Path(cfg.run.output_dir)
    if resume and _finished(cfg, run_dir):
        logger.warning("%s: this run has finished; nothing to resume", run_dir)
        return run_dir
    if get_template(cfg.data.template).chat_tools:
        # The model's own format renders the rows' history and writes SFT targets, rewards and rollouts:
        # resolved once from the model's tokenizer and handed on with the config (the chat template is
        # checked again per stage).
        cfg.check_model()
        tokenizer = load_tokenizer(cfg.model.name_or_path, cfg.model.trust_remote_code)
        cfg = copy.copy(cfg)
        cfg.data = cfg.data.with_template(resolve_native(tokenizer, cfg.data.template, where="data.template"))
    # Data errors (missing ground truth, bad records) stop the run here, before any model is loaded.
    rows = train_rows if train_rows is not None else _rows(cfg, cfg.data.train, cfg.data.max_train_samples)
    check_rows(rows)
    if not rows:
        raise ConfigError("data.train: no training rows")
    cfg.check_model()  # after the data: a data error is reported first, and no model is loaded for it
    if val_rows is None and cfg.data.val:
        val_rows = _rows(cfg, cfg.data.val, cfg.data.max_val_samples, "data.val")
    val_rows = (val_rows or [])[: cfg.diagnostics.eval_samples]
    if cfg.agentic.enabled and cfg.grpo.enabled:  # before SFT: the episodes need tasks on both files
        check_task_rows(rows, "data.train", cfg.agentic.environment)
        check_task_rows(val_rows, "data.val", cfg.agentic.environment)
    run_dir.mkdir(parents=True, exist_ok=True)
    if _is_main():  # only the main process writes run files: its run.json comes first
        dump_config(cfg, run_dir / "config.yaml")
    metrics = run_dir / "metrics.jsonl"
    cpu = on_cpu(cfg)
    model_path = cfg.model.name_or_path
    summary: dict[str, Any] = {"config": cfg.name, "run_dir": str(run_dir)}
    if cfg.sft.enabled:
        model_path = _sft_stage(cfg, rows, run_dir, metrics, cpu, resume, summary)
    if cfg.grpo.enabled:
        reward_funcs = reward_funcs if reward_funcs is not None else build_reward_funcs(cfg)
        _grpo_stage(
            cfg, model_path, rows, val_rows or [], run_dir, metrics, cpu, resume, reward_funcs, summary
        )
    summary["seconds"] = time.perf_counter() - t_start
    if _is_main():
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return run_dir


def resolved(cfg: TrainConfig) -> TrainConfig:
    """A copy with template specs ("module:name") resolved to registered template names."""
    cfg = copy.deepcopy(cfg)
    cfg.data.template = resolve_template(cfg.data.template)
    if cfg.reward.template:
        cfg.reward.template = resolve_template(cfg.reward.template, "reward.template")
    cfg.data.system_prompt = resolve_system_prompt(cfg.data.system_prompt)
    return cfg


def _finished(cfg: TrainConfig, run_dir: Path) -> bool:
    """Whether `run_dir` holds a run whose enabled stages all completed: the last stage's model and
    summary.json (written last) are there."""
    final = run_dir / ("final" if cfg.grpo.enabled else "sft/final")
    summary = run_dir / "summary.json"
    if not (summary.is_file() and lora.saved_model(final) is not None):
        return False
    try:
        return "seconds" in json.loads(summary.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


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
    }


def _is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _check_chat_template(cfg: TrainConfig, tokenizer: Any, rows: list[dict[str, Any]]) -> None:
    """Refuse, before any step, a chat template that cannot render the tools of a template that hands
    them to it (``native``: `resolve_native`), and prompts that keep earlier reasoning
    (data.keep_reasoning, messages history) when the model's chat template drops it, as Qwen3's does: the
    model would train on none of it."""
    resolve_native(tokenizer, cfg.data.template, where="data.template")
    if any(m.get("role") == "assistant" for r in rows for m in r.get("prompt") or ()):
        d = cfg.data
        check_history_reasoning(
            tokenizer, d.prompt_template, d.keep_reasoning, d.history, where="data.keep_reasoning"
        )


def _sft_stage(
    cfg: TrainConfig, rows: list[dict], run_dir: Path, metrics: Path, cpu: bool, resume: bool, summary: dict
) -> str:
    final = run_dir / "sft" / "final"
    done = lora.saved_model(final)  # with LoRA: final/merged, the model GRPO continues from
    if resume and done is not None:
        logger.info("SFT already finished in %s; skipping", final)
        return str(done)
    d = cfg.data
    srows = config_sft_rows(cfg, load_samples(d.train, d.max_train_samples))
    if cfg.sft.engine == "torch":
        if world_size() > 1:
            raise ConfigError(
                "sft.engine: 'torch' is a single-process loop; use 'trl' with several processes"
            )
        ckpt = last_complete_checkpoint(run_dir / "sft", (SFT_STATE,)) if resume else None
        adapter = lora.enabled(cfg.model.lora)  # the checkpoint holds an adapter for the base model
        model, tok = _load(cfg, cfg.model.name_or_path if adapter else ckpt or cfg.model.name_or_path, cpu)
        model = lora.wrap(model, cfg.model.lora, ckpt if adapter else None, seed=cfg.run.seed)
        _check_chat_template(cfg, tok, rows)
        loop = SFTLoop.from_config(cfg, model, tok, srows, "cpu" if cpu else "cuda")
        if ckpt:
            loop.restore(ckpt)
            logger.info("SFT resumes at step %d from %s", loop.step, ckpt)
        truncate_metrics(metrics, "sft", loop.step)
        summary["sft"] = run_sft_torch(cfg, loop, run_dir / "sft", metrics)
    else:
        model, tok = _load(cfg, cfg.model.name_or_path, cpu)
        _check_chat_template(cfg, tok, rows)
        ckpt = last_complete_checkpoint(run_dir / "sft") if resume else None
        truncate_metrics(metrics, "sft", int(ckpt.rsplit("-", 1)[1]) if ckpt else 0)
        trainer = run_sft_trl(
            cfg,
            model,
            tok,
            srows,
            str(run_dir / "sft"),
            cpu,
            [MetricsLogger(metrics, "sft"), _CheckpointMarker()],
            resume=ckpt,
        )
        model = trainer.model
        summary["sft"] = {"steps": trainer.state.global_step}
    if _is_main():
        model.save_pretrained(final)
        tok.save_pretrained(final)
        lora.save_merged(model, tok, final)  # LoRA: the adapter is in final, the merged model in final/merged
    _barrier()  # other ranks load the warm start from `final` next
    return str(lora.saved_model(final) or final)


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def shutdown_processes() -> None:
    """Wait for every rank, then close the process group (a no-op in a single process).

    Call once, after the last `train`: without it gloo's threads occasionally abort a rank at
    interpreter exit ("terminate called without an active exception") after all work is done.
    """
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _grpo_stage(
    cfg: TrainConfig,
    model_path: str,
    rows: list[dict],
    val_rows: list[dict],
    run_dir: Path,
    metrics: Path,
    cpu: bool,
    resume: bool,
    reward_funcs: list[Any],
    summary: dict,
) -> None:
    model, tok = _load(cfg, model_path, cpu)
    _check_chat_template(cfg, tok, rows)
    rows, dropped = drop_long_prompts(list(rows), tok, cfg.data.max_prompt_tokens)
    summary["prompts_dropped_too_long"] = dropped
    out_dir = run_dir / "grpo"
    ckpt = last_complete_checkpoint(out_dir) if resume else None
    if resume and ckpt is None:
        logger.info("no complete GRPO checkpoint in %s; starting GRPO from the beginning", out_dir)
    truncate_metrics(metrics, "grpo", int(ckpt.rsplit("-", 1)[1]) if ckpt else 0)
    earlier = read_metrics(metrics, "grpo")  # a resumed run's clock continues from its checkpoint
    clock = TrainingClock(
        max((r.get("train_s", 0.0) for r in earlier), default=0.0),
        max((r.get("train_cpu_s", 0.0) for r in earlier), default=0.0),
    )
    template = cfg.answer_template()
    ag = cfg.agentic
    if ag.enabled:
        settings = cfg.environment_settings()
        agentic = {"rollout_func": AgenticRollout(template, ag.max_turns,
                                                  ag.budget(cfg.grpo.max_completion_length), ag.environment,
                                                  settings)}
        scorer = EpisodeScorer(template, ag.max_turns, cfg.diagnostics.eval_max_new_tokens,
                               cfg.diagnostics.eval_batch_size, ag.environment, settings)
    else:
        agentic, scorer = {}, None
    plan = plan_for_run(cfg, model, tok, rows, cpu)  # activation checkpointing from a memory estimate
    summary["update_plan"] = plan.to_dict()
    trainer = ToolTuneGRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=grpo_args(cfg, str(out_dir), cpu, world_size(), plan.checkpointing),
        peft_config=lora.peft_config(cfg.model.lora, model),  # LoRA: reference = the adapter disabled
        train_dataset=rows_dataset(rows),
        processing_class=tok,
        **selection_kwargs(cfg),
        region_fn=RegionTagger(tok, template) if cfg.diagnostics.entropy_split and not ag.enabled else None,
        **agentic,
    )
    trainer.add_callback(
        MetricsLogger(metrics, "grpo", cfg.grpo.max_seconds, clock, cfg.grpo.max_seconds_clock)
    )
    dg = cfg.diagnostics
    heldout = HeldOutEval(
        trainer, val_rows, template, dg.eval_every, dg.eval_max_new_tokens, dg.eval_batch_size, clock, scorer
    )
    trainer.add_callback(heldout)
    if cfg.grpo.stop_on_divergence:
        trainer.add_callback(DivergenceGuard(trainer, prompts_per_step=cfg.grpo.prompts_per_update
                                             or cfg.grpo.prompts_per_step))
    trainer.remove_callback(PrinterCallback)  # these print every log record; the file holds them
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(StepProgress("grpo", cfg.grpo.max_seconds, clock, cfg.grpo.max_seconds_clock))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    trainer.train(resume_from_checkpoint=ckpt)
    if trainer.accelerator.is_main_process:
        trainer.save_model(str(run_dir / "final"))
        tok.save_pretrained(run_dir / "final")
        lora.save_merged(trainer.accelerator.unwrap_model(trainer.model), tok, run_dir / "final")
    summary["grpo"] = {
        "steps": trainer.state.global_step,
        "resumed_from": ckpt,
        heldout.key.removeprefix("tooltune/"): heldout.history,
        "filter": trainer.tooltune.prompt_filter.state_dict() if trainer.tooltune.prompt_filter else None,
        "stopped_early": trainer.tooltune.stop_reason,
    }
