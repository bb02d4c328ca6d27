"""SFT warm start on the rendered ground-truth answers (R2IF: SFT before RL).

Rows are conversational prompt/completion pairs (`tooltune.training.data.sft_rows`), so TRL's
SFTTrainer computes the loss on the completion (the rendered answer) only. `engine: torch` is a bare
training loop with the same loss for tiny CPU models, where the trainer's per-step overhead doubles
the step time (quickstart feasibility notes); TRL stays the default because it scales (DDP, FSDP,
DeepSpeed, LoRA) and real models dominate its overhead.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def sft_args(cfg: Any, output_dir: str, on_cpu: bool) -> Any:
    """TRL SFTConfig from the `sft` and `run` sections."""
    from trl import SFTConfig

    s, r = cfg.sft, cfg.run
    return SFTConfig(
        output_dir=output_dir,
        num_train_epochs=s.epochs,
        max_steps=s.max_steps,
        learning_rate=s.learning_rate,
        lr_scheduler_type=s.lr_scheduler,
        warmup_steps=s.warmup_ratio,
        per_device_train_batch_size=s.batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps,
        max_length=s.max_length,
        completion_only_loss=True,
        seed=r.seed,
        save_steps=r.save_steps,
        save_total_limit=r.save_total_limit,
        logging_steps=r.logging_steps,
        report_to=list(r.report_to) or "none",
        use_cpu=on_cpu,
        bf16=r.bf16 and not on_cpu,
        gradient_checkpointing=r.gradient_checkpointing and not on_cpu,
        dataset_kwargs={"skip_prepare_dataset": False},
        disable_tqdm=False,
    )


def run_sft_trl(
    cfg: Any,
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    output_dir: str,
    on_cpu: bool,
    callbacks: list[Any],
    resume: str | None = None,
) -> Any:
    """Train with TRL's SFTTrainer; returns the trainer (model trained in place)."""
    from datasets import Dataset
    from trl import SFTTrainer

    dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])
    trainer = SFTTrainer(
        model=model,
        args=sft_args(cfg, output_dir, on_cpu),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def _encode(tokenizer: Any, row: dict, max_length: int) -> tuple[list[int], list[int]]:
    prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
    if not full.startswith(prompt):
        raise ValueError(
            f"sample {row.get('sample_id')!r}: chat template does not extend the prompt; use sft.engine=trl"
        )
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    c_ids = tokenizer(full[len(prompt) :], add_special_tokens=False)["input_ids"]
    ids = (p_ids + c_ids)[:max_length]
    labels = ([-100] * len(p_ids) + c_ids)[:max_length]
    return ids, labels


def pad_batch(batch: Sequence[tuple[list[int], list[int]]], pad_id: int, device: str = "cpu") -> tuple:
    """Right-pad (input ids, labels) pairs: (input_ids, attention_mask, labels), labels -100 on pads."""
    import torch

    width = max(len(ids) for ids, _ in batch)
    ids = torch.tensor([x + [pad_id] * (width - len(x)) for x, _ in batch], device=device)
    labels = torch.tensor([y + [-100] * (width - len(y)) for _, y in batch], device=device)
    attn = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x, _ in batch], device=device)
    return ids, attn, labels


def run_sft_torch(
    cfg: Any, model: Any, tokenizer: Any, rows: list[dict], metrics_path: str | Path, device: str = "cpu"
) -> dict[str, float]:
    """Bare AdamW loop with completion-only loss (fast path for tiny models); returns final stats."""
    import torch
    from tqdm.auto import trange

    s = cfg.sft
    g = torch.Generator().manual_seed(cfg.run.seed)
    encoded = [_encode(tokenizer, r, s.max_length) for r in rows]
    steps_per_epoch = max(1, len(encoded) // s.batch_size)
    total = s.max_steps if s.max_steps > 0 else max(1, math.ceil(s.epochs * steps_per_epoch))
    warm = int(total * s.warmup_ratio)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=s.learning_rate, weight_decay=0.0)

    def lr_at(step: int) -> float:
        if warm and step < warm:
            return (step + 1) / warm
        if s.lr_scheduler in ("constant", "constant_with_warmup"):
            return 1.0
        q = (step - warm) / max(1, total - warm)
        return max(0.0, 1 - q) if s.lr_scheduler == "linear" else 0.5 * (1 + math.cos(math.pi * q))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    pad = tokenizer.pad_token_id
    order: list[int] = []
    t0, loss_val = time.perf_counter(), float("nan")
    for step in trange(total, desc="sft", unit="step"):
        if len(order) < s.batch_size:
            order += torch.randperm(len(encoded), generator=g).tolist()
        batch, order = [encoded[i] for i in order[: s.batch_size]], order[s.batch_size :]
        ids, attn, labels = pad_batch(batch, pad, device)
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        loss_val = loss.item()
        if (step + 1) % max(1, cfg.run.logging_steps) == 0 or step + 1 == total:
            with open(metrics_path, "a", encoding="utf-8") as f:
                f.write(
                    json.dumps(
                        {
                            "stage": "sft",
                            "step": step + 1,
                            "loss": loss_val,
                            "learning_rate": sched.get_last_lr()[0],
                        }
                    )
                    + "\n"
                )
    return {"steps": total, "loss": loss_val, "seconds": time.perf_counter() - t0}
