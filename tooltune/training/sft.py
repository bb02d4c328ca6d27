"""SFT warm start on the rendered target answers (R2IF: SFT before RL), with two engines.

Rows are conversational prompt/completion pairs (`tooltune.training.data.sft_rows`); the loss covers
the completion (the rendered answer) only.

- `engine: trl`: TRL's SFTTrainer (`run_sft_trl`); the default because it scales (DDP, FSDP,
  DeepSpeed) and on real models the model dominates its per-step overhead.
- `engine: torch`: `SFTLoop`, a bare loop for tiny CPU models, where the trainer's overhead doubled the
  step time. The quickstart drives the same loop directly: it stops at a measured warm start (a
  callback every N steps), continues later for a wall-time budget from the saved optimizer state, and
  resumes a killed run from its last checkpoint.

With `model.lora.r > 0` both engines train a LoRA adapter (`tooltune.training.lora`): the TRL trainer
gets the adapter config; `SFTLoop` is given the wrapped model and optimizes its trainable parameters,
and its checkpoints hold the adapter.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tooltune.prompts import encode_chat
from tooltune.schema.rows import row_tools
from tooltune.training import lora
from tooltune.training.data import rows_dataset
from tooltune.training.progress import SecondsOf, TimeBudget, phase_bar, show_progress

SFT_STATE = "sft_state.pt"
"""Optimizer, step and RNG state of an `SFTLoop` checkpoint; written last, so it marks the folder complete."""

SCHEDULES = ("constant", "constant_with_warmup", "linear", "cosine")


def sft_args(cfg: Any, output_dir: str, on_cpu: bool) -> Any:
    """TRL SFTConfig from the `sft` and `run` sections."""
    from trl import SFTConfig  # deferred: heavy

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
    """Train with TRL's SFTTrainer; returns the trainer (model trained in place; with LoRA,
    `trainer.model` is the adapter-wrapped model). `resume`: a checkpoint folder to continue from.
    Rows are given tokenized (`trl_tokens`), with their chat-template tools (``native``)."""
    from trl import SFTTrainer  # deferred: heavy

    dataset = rows_dataset([trl_tokens(tokenizer, r) for r in rows])
    trainer = SFTTrainer(
        model=model,
        args=sft_args(cfg, output_dir, on_cpu),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
        peft_config=lora.peft_config(cfg.model.lora, model),
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def trl_tokens(tokenizer: Any, row: dict) -> dict[str, list[int]]:
    """A prompt/completion row as TRL's SFTTrainer tokenizes it (the prompt with the generation prompt,
    the whole conversation without; the completion starts where the two part), given to it already
    tokenized so that the text of tools and users is plain text (`tooltune.prompts.encode_chat`)."""
    tools = row_tools(row)
    prompt = encode_chat(tokenizer, row["prompt"], True, tools)
    full = encode_chat(tokenizer, [*row["prompt"], *row["completion"]], False, tools)
    common = next((i for i, (a, b) in enumerate(zip(prompt, full, strict=False)) if a != b),
                  min(len(prompt), len(full)))
    return {"input_ids": full, "completion_mask": [0] * common + [1] * (len(full) - common)}


def encode(tokenizer: Any, row: dict, max_length: int = 0) -> tuple[list[int], list[int]]:
    """(input ids, labels) of one prompt/completion row; labels are -100 on the prompt.

    The prompt is the chat template with the generation prompt (and the row's chat-template tools,
    `row_tools`); the completion is the assistant text followed by the end-of-sequence token, tokenized
    on its own (what generation stops on). Both are cut to `max_length` tokens together (0 = no limit).
    """
    p_ids = encode_chat(tokenizer, row["prompt"], True, row_tools(row))
    answer = "".join(m.get("content") or "" for m in row["completion"]) + tokenizer.eos_token
    a_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    ids, labels = p_ids + a_ids, [-100] * len(p_ids) + a_ids
    return (ids[:max_length], labels[:max_length]) if max_length > 0 else (ids, labels)


def pad_batch(batch: Sequence[tuple[list[int], list[int]]], pad_id: int, device: str = "cpu") -> tuple:
    """Right-pad (input ids, labels) pairs: (input_ids, attention_mask, labels), labels -100 on pads."""
    import torch  # deferred: heavy

    width = max(len(ids) for ids, _ in batch)
    ids = torch.tensor([x + [pad_id] * (width - len(x)) for x, _ in batch], device=device)
    labels = torch.tensor([y + [-100] * (width - len(y)) for _, y in batch], device=device)
    attn = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x, _ in batch], device=device)
    return ids, attn, labels


def lr_factor(step: int, schedule: str, warmup_steps: int, total_steps: int) -> float:
    """Multiplier of the peak learning rate at optimizer step `step` (0-based).

    Linear warm-up over `warmup_steps` ((step + 1) / warmup_steps), then constant, or a linear or cosine
    decay to 0 at `total_steps`."""
    if schedule not in SCHEDULES:
        raise ValueError(f"lr schedule {schedule!r}: expected one of {', '.join(SCHEDULES)}")
    if warmup_steps and step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule in ("constant", "constant_with_warmup"):
        return 1.0
    q = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return max(0.0, 1.0 - q) if schedule == "linear" else 0.5 * (1.0 + math.cos(math.pi * q))


Row = tuple[list[int], list[int]]
"""An encoded SFT row: (input ids, labels)."""


def passes(rows: Sequence[Row], tokens: int) -> list[list[Row]]:
    """`rows` split into forward/backward passes of at most `tokens` padded tokens each (rows x longest
    row; a longer row is a pass of its own), rows of like length together; `tokens` 0: one pass. The
    passes' summed loss is the batch's: memory follows the largest pass instead of the batch."""
    if tokens <= 0:
        return [list(rows)]
    out: list[list[Row]] = []
    for row in sorted(rows, key=lambda r: len(r[0])):
        if out and (len(out[-1]) + 1) * len(row[0]) <= tokens:
            out[-1].append(row)  # sorted: this row is the pass's longest
        else:
            out.append([row])
    return out


def answer_loss(model: Any, ids: Any, attn: Any, labels: Any) -> Any:
    """Summed cross-entropy of the answer tokens (labels other than -100), next-token shifted as the
    model's own causal-LM loss. Logits are computed only at the positions that predict an answer token
    of some row (``logits_to_keep`` with their indices, where the model's forward takes it): a prompt of
    1,000 tokens and an answer of 80 need 80 rows of vocabulary logits, not 1,080 (49k floats each)."""
    import torch  # deferred: heavy

    targets = labels[:, 1:]
    keep = (targets != -100).any(dim=0).nonzero()[:, 0]
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT model
    if "logits_to_keep" in inspect.signature(base.forward).parameters:
        logits = model(input_ids=ids, attention_mask=attn, use_cache=False, logits_to_keep=keep).logits
    else:
        logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits[:, keep]
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets[:, keep].flatten(),
                                             ignore_index=-100, reduction="sum")


Callback = Callable[["SFTLoop"], Any]
"""Called by `SFTLoop.train` with the loop; a true return value stops training."""


class SFTLoop:
    """Bare AdamW loop with completion-only loss, for tiny models.

    Each optimizer step draws `batch_size` rows (x `accumulation` micro-batches) uniformly with
    replacement from a `random.Random(seed)`, runs the causal-LM loss on the completion tokens (logits at
    the answer positions only: `answer_loss`), in passes of at most `pass_tokens` padded tokens
    (`passes`; 0 = one pass) whose summed loss is the batch's, optionally with gradient checkpointing, clips
    the gradient norm to `max_grad_norm` and sets the learning rate from `lr_factor`. Only parameters
    that require gradients are optimized (a LoRA-wrapped model: its adapters). `save` and `restore` carry
    the optimizer, step, row-drawing and torch RNGs and training time, so a restored loop continues
    exactly as an uninterrupted one would.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        rows: Sequence[dict],
        *,
        batch_size: int,
        learning_rate: float,
        seed: int = 0,
        schedule: str = "constant_with_warmup",
        warmup_steps: int = 0,
        total_steps: int = 0,
        accumulation: int = 1,
        max_length: int = 0,
        max_grad_norm: float = 1.0,
        device: str = "cpu",
        pass_tokens: int = 0,
        gradient_checkpointing: bool = False,
    ) -> None:
        import torch  # deferred: heavy

        if not rows:
            raise ValueError("SFTLoop: no training rows")
        lr_factor(0, schedule, warmup_steps, total_steps)  # reject an unknown schedule now
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.learning_rate, self.accumulation = batch_size, learning_rate, accumulation
        self.schedule, self.warmup_steps, self.total_steps = schedule, warmup_steps, total_steps
        self.max_grad_norm, self.device, self.pass_tokens = max_grad_norm, device, pass_tokens
        self.encoded = [encode(tokenizer, r, max_length) for r in rows]
        self.rng = random.Random(seed)
        self.model.to(device)
        if gradient_checkpointing:  # only in train mode: generation with the same model is unaffected
            kwargs = {"use_reentrant": False}
            if hasattr(model, "activation_checkpointing_enable"):  # transformers' name from 5.x on
                model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.params, lr=learning_rate, weight_decay=0.0)
        self.step = 0
        self.loss = float("nan")
        self.train_seconds = 0.0  # training time so far (callbacks excluded), carried by save/restore
        self.postfix: dict[str, str] = {}  # shown on the progress bar; callbacks may add entries

    @classmethod
    def from_config(
        cls, cfg: Any, model: Any, tokenizer: Any, rows: Sequence[dict], device: str = "cpu"
    ) -> SFTLoop:
        """The loop of a training config's `sft` section (steps from max_steps, else epochs)."""
        s = cfg.sft
        loop = cls(
            model,
            tokenizer,
            rows,
            batch_size=s.batch_size,
            learning_rate=s.learning_rate,
            seed=cfg.run.seed,
            schedule=s.lr_scheduler,
            accumulation=s.gradient_accumulation_steps,
            max_length=s.max_length,
            device=device,
            pass_tokens=s.pass_tokens,
            gradient_checkpointing=s.gradient_checkpointing,
        )
        loop.total_steps = planned_steps(cfg, len(rows))
        loop.warmup_steps = round(loop.total_steps * s.warmup_ratio)
        return loop

    def lr(self) -> float:
        """Learning rate of the next optimizer step."""
        return self.learning_rate * lr_factor(self.step, self.schedule, self.warmup_steps, self.total_steps)

    def train_step(self) -> float:
        """One optimizer step; returns its loss (mean over the micro-batches)."""
        import torch  # deferred: heavy

        self.model.train()
        for g in self.opt.param_groups:
            g["lr"] = self.lr()
        total = 0.0
        for _ in range(self.accumulation):
            rows = [self.encoded[self.rng.randrange(len(self.encoded))] for _ in range(self.batch_size)]
            # the batch's loss is the mean over its answer tokens: each pass adds its share of that mean
            targets = max(1, sum(sum(1 for y in labels[1:] if y != -100) for _, labels in rows))
            for chunk in passes(rows, self.pass_tokens):
                ids, attn, labels = pad_batch(chunk, self.tokenizer.pad_token_id, self.device)
                loss = answer_loss(self.model, ids, attn, labels) / (targets * self.accumulation)
                loss.backward()
                total += loss.item()
        if self.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        self.loss = total
        return total

    def train(
        self,
        steps: int | None = None,
        seconds: float | None = None,
        every: int = 0,
        callback: Callback | None = None,
        progress: str | None = None,
        budget: TimeBudget | None = None,
    ) -> int:
        """Train until `steps` more optimizer steps or the time budget is spent, whichever first.

        The budget is `budget` (seconds of its clock, checked after each step, before the callback, so a
        callback that measures the same budget later sees it spent too), else `seconds` more training
        time of this loop. `callback(loop)` runs after every step whose number (`loop.step`) is a multiple of
        `every`, and after the last step; its time is not training time (`seconds` and `train_seconds`
        leave it out), and a true return value stops training. `progress` names a progress bar: of the
        budget's seconds when there is a budget (`tooltune.training.progress`), else of the steps.
        Returns the number of steps taken.
        """
        if budget is None and seconds is not None:
            budget = SecondsOf("wall", seconds, lambda: self.train_seconds)
        done, last_called = 0, -1
        out_of_time = budget is not None and budget.spent >= budget.budget
        bar = phase_bar(progress, steps, budget)
        try:
            while (steps is None or done < steps) and not out_of_time:
                t = time.perf_counter()
                self.train_step()
                self.train_seconds += time.perf_counter() - t
                done += 1
                out_of_time = budget is not None and budget.spent >= budget.budget
                stop = False
                if callback is not None and every and self.step % every == 0:
                    last_called = self.step
                    stop = callback(self)
                spent = budget.spent if budget is not None else None
                show_progress(bar, spent, done, {"loss": f"{self.loss:.3f}", **self.postfix})
                if stop:
                    break
            if callback is not None and done and last_called != self.step:
                callback(self)
        finally:
            bar.close()
        return done

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str | Path, meta: dict[str, Any] | None = None) -> Path:
        """Write model (a LoRA-wrapped model: its adapter), tokenizer and loop state to `path`; the state
        file goes last (completeness marker).

        `meta` (JSON-able) is stored in the state file and returned by `restore`: a caller's own
        progress (a validation curve, say) is then exactly as current as the weights."""
        import torch  # deferred: heavy

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / SFT_STATE).unlink(missing_ok=True)
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        state = {
            "optimizer": self.opt.state_dict(),
            "step": self.step,
            "loss": self.loss,
            "rng": self.rng.getstate(),
            "train_seconds": self.train_seconds,
            "meta": json.dumps(meta or {}),
            "torch_rng": torch.get_rng_state(),  # dropout (e.g. a LoRA adapter's) draws from it
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        }
        tmp = path / (SFT_STATE + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path / SFT_STATE)
        return path

    def restore(self, path: str | Path) -> dict[str, Any]:
        """Take optimizer, step, RNGs and training time from a checkpoint written by `save`; return its meta.

        The weights are not touched: load the model from the same folder (`from_pretrained`), or for an
        adapter checkpoint the base model wrapped with it (`lora.wrap(model, section, adapter=path)`)."""
        import torch  # deferred: heavy

        state = torch.load(Path(path) / SFT_STATE, weights_only=False, map_location=self.device)
        self.opt.load_state_dict(state["optimizer"])
        self.step, self.loss = state["step"], state["loss"]
        self.rng.setstate(state["rng"])
        self.train_seconds = state["train_seconds"]
        if state.get("torch_rng") is not None:
            torch.set_rng_state(state["torch_rng"].cpu())
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda_rng"]])
        return json.loads(state.get("meta") or "{}")


def is_complete(path: str | Path) -> bool:
    """True when `path` holds a finished `SFTLoop.save`."""
    return (Path(path) / SFT_STATE).is_file()


def planned_steps(cfg: Any, n_rows: int) -> int:
    """Optimizer steps of the `sft` section: max_steps, else epochs over `n_rows` rows."""
    s = cfg.sft
    if s.max_steps > 0:
        return s.max_steps
    per_step = s.batch_size * s.gradient_accumulation_steps
    return max(1, math.ceil(s.epochs * n_rows / per_step))


def run_sft_torch(
    cfg: Any, loop: SFTLoop, output_dir: str | Path, metrics_path: str | Path
) -> dict[str, Any]:
    """The `sft.engine: torch` stage: train `loop` to the planned step count.

    Logs {"stage": "sft", "step", "loss", "learning_rate", "train_s"} every `run.logging_steps` steps to
    `metrics_path` and saves `output_dir/checkpoint-N` every `run.save_steps` steps (keeping the last
    `run.save_total_limit`), so a killed run resumes from `loop.restore(last checkpoint)`.
    """
    r = cfg.run
    out = Path(output_dir)
    start, t0 = loop.step, time.perf_counter()

    def on_step(lp: SFTLoop) -> None:
        if lp.step % max(1, r.logging_steps) == 0 or lp.step == lp.total_steps:
            record = {
                "stage": "sft",
                "step": lp.step,
                "loss": lp.loss,
                "learning_rate": lp.learning_rate
                * lr_factor(lp.step - 1, lp.schedule, lp.warmup_steps, lp.total_steps),
                "train_s": round(lp.train_seconds, 3),
            }
            with open(metrics_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        if r.save_steps > 0 and lp.step % r.save_steps == 0 and lp.step < lp.total_steps:
            lp.save(out / f"checkpoint-{lp.step}")
            _prune(out, r.save_total_limit)

    loop.train(steps=max(0, loop.total_steps - loop.step), every=1, callback=on_step, progress="sft")
    return {
        "steps": loop.step,
        "resumed_at": start,
        "loss": loop.loss,
        "seconds": time.perf_counter() - t0,
        "train_s": loop.train_seconds,
    }


def _prune(folder: Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoint-N folders (keep <= 0: keep all)."""
    if keep <= 0:
        return
    found = sorted(
        (int(p.name.split("-", 1)[1]), p)
        for p in folder.glob("checkpoint-*")
        if p.name.split("-", 1)[1].isdigit()
    )
    for _, p in found[:-keep]:
        shutil.rmtree(p, ignore_errors=True)
