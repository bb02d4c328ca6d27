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

`train` checks the engine versions and resolves the run once (`resolved_run.ResolvedRun`: settings,
template, system prompt, rows, the model path), before any folder is written; the stages take the
resolved run (`grpo_stage.GrpoStage` for GRPO).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch.distributed as dist
from transformers import TrainerCallback

from tooltune.config import prepare_output
from tooltune.rundir import RunLock, check_identity, check_inputs, write_identity
from tooltune.training import lora
from tooltune.training.config import ConfigError, TrainConfig, dump_config
from tooltune.training.data import config_sft_rows, load_samples
from tooltune.training.diagnostics import MetricsLogger, read_metrics, truncate_metrics
from tooltune.training.engine_fence import check_engine_versions
from tooltune.training.epoch_hooks import STATE_FILE
from tooltune.training.grpo_stage import GrpoStage, build_reward_funcs
from tooltune.training.guard import replay
from tooltune.training.resolved_run import ResolvedRun, Rows, resolve_config
from tooltune.training.resume import last_complete_checkpoint as resume_checkpoint
from tooltune.training.resume import run_inputs
from tooltune.training.sft import SFT_STATE, SFTLoop, run_sft_torch, run_sft_trl

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


def train(
    cfg: TrainConfig,
    resume: bool = False,
    reward_funcs: list[Any] | None = None,
    train_rows: Rows | None = None,
    val_rows: Rows | None = None,
) -> Path:
    """Run the enabled stages; with `resume`, continue from the last complete checkpoint of each stage.

    Everything is checked before the run folder is written, each check once: the engine versions, the
    settings (`resolve_config`), the data and the model path (`ResolvedRun.resolve`), the output folder.
    The run folder is one run: its settings and the content digests of its inputs (data files, model
    folder: `resume.run_inputs`) are recorded in `run.json`; `resume` continues only the same settings
    on the same inputs (`rundir.RunMismatch` names every difference, and each changed input with its
    file) and a finished run resumes to nothing; a folder holding results is refused without `resume`;
    one process writes it at a time (`rundir.RunFolderBusy`)."""
    check_engine_versions()  # the trainer overrides private TRL / transformers methods of these versions
    cfg = resolve_config(cfg)
    if train_rows is None:
        cfg.check_data_files()
    run = ResolvedRun.resolve(cfg, train_rows, val_rows)
    run_dir = run.run_dir
    inputs = run_inputs(cfg, train_rows, val_rows)
    # the recorded settings are the resolved ones, without the model's format (a value, not a setting)
    identity = {"command": "train", "config": cfg.to_dict(), "inputs": {k: d for k, (_, d) in inputs.items()}}
    if not _is_main():
        # Read-only, and only for other settings: the main process may be creating this very run.
        check_inputs(run_dir, inputs)
        check_identity(run_dir, identity, resume=True)
        return _train(run, resume, reward_funcs)
    prepare_output(run_dir, "run.output_dir", folder=True)
    with RunLock(run_dir):
        check_inputs(run_dir, inputs)  # a changed input named with its file, before the other fields
        if not check_identity(run_dir, identity, resume):
            write_identity(run_dir, identity)
        return _train(run, resume, reward_funcs)


def _train(run: ResolvedRun, resume: bool, reward_funcs: list[Any] | None) -> Path:
    t_start = time.perf_counter()
    cfg, run_dir = run.config, run.run_dir
    if resume and _finished(cfg, run_dir):
        overruled = _guard_overruled(cfg, run_dir)
        if overruled is None:
            logger.warning("%s: this run has finished; nothing to resume", run_dir)
            return run_dir
        logger.warning("%s", overruled)
    run_dir.mkdir(parents=True, exist_ok=True)
    if _is_main():  # only the main process writes run files: its run.json comes first
        dump_config(cfg, run_dir / "config.yaml")
    model_path = cfg.model.name_or_path
    summary: dict[str, Any] = {"config": cfg.name, "run_dir": str(run_dir)}
    if cfg.sft.enabled:
        model_path = _sft_stage(run, resume, summary)
    if cfg.grpo.enabled:
        grpo_dir = run_dir / "grpo"
        ckpt = last_complete_checkpoint(grpo_dir) if resume else None
        if resume and ckpt is None:
            logger.info("no complete GRPO checkpoint in %s; starting GRPO from the beginning", grpo_dir)
        funcs = reward_funcs if reward_funcs is not None else build_reward_funcs(cfg)
        summary.update(GrpoStage(run, model_path, funcs, ckpt).train())
    summary["seconds"] = time.perf_counter() - t_start
    if _is_main():
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return run_dir


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


def _guard_overruled(cfg: TrainConfig, run_dir: Path) -> str | None:
    """Why a finished run resumes after all: the divergence guard stopped its GRPO stage, and the guard,
    replayed over the steps the run logged (`guard.replay`), no longer stops it; None otherwise."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    stop = (summary.get("grpo") or {}).get("stopped_early") if isinstance(summary, dict) else None
    if not (cfg.grpo.enabled and cfg.grpo.stop_on_divergence and isinstance(stop, str)
            and stop.startswith("diverged")):
        return None
    g = cfg.grpo
    if replay(read_metrics(run_dir / "metrics.jsonl", "grpo"), g.prompts_per_update or g.prompts_per_step):
        return None
    return (f"{run_dir}: the divergence guard stopped this run ({stop}) but no longer stops it on the "
            "steps the run logged; resuming GRPO from its last checkpoint")


def _is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _sft_stage(run: ResolvedRun, resume: bool, summary: dict[str, Any]) -> str:
    """SFT warm start; returns the path of the model GRPO continues from."""
    cfg, run_dir, metrics, cpu = run.config, run.run_dir, run.metrics, run.cpu
    final = run_dir / "sft" / "final"
    done = lora.saved_model(final)  # with LoRA: final/merged, the model GRPO continues from
    if resume and done is not None:
        logger.info("SFT already finished in %s; skipping", final)
        return str(done)
    d = cfg.data
    srows = config_sft_rows(cfg, load_samples(d.train, d.max_train_samples))
    if cfg.sft.engine == "torch":
        if run.processes > 1:
            raise ConfigError(
                "sft.engine: 'torch' is a single-process loop; use 'trl' with several processes"
            )
        ckpt = last_complete_checkpoint(run_dir / "sft", (SFT_STATE,)) if resume else None
        adapter = lora.enabled(cfg.model.lora)  # the checkpoint holds an adapter for the base model
        model, tok = run.load_model(cfg.model.name_or_path if adapter else ckpt or cfg.model.name_or_path)
        model = lora.wrap(model, cfg.model.lora, ckpt if adapter else None, seed=cfg.run.seed)
        run.check_chat_template(tok, run.rows)
        loop = SFTLoop.from_config(cfg, model, tok, srows, "cpu" if cpu else "cuda")
        if ckpt:
            loop.restore(ckpt)
            logger.info("SFT resumes at step %d from %s", loop.step, ckpt)
        truncate_metrics(metrics, "sft", loop.step)
        summary["sft"] = run_sft_torch(cfg, loop, run_dir / "sft", metrics)
    else:
        model, tok = run.load_model(cfg.model.name_or_path)
        run.check_chat_template(tok, run.rows)
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
