"""The `step` case of bench/rollout.py: whole GRPO steps of the trainer, today's rollouts against the new.

`ToolTuneGRPOTrainer` with the packed shared-prefix update on (`shared_prefix_path="packed"`, the update
of the real-model recipe), `--steps` steps of `--step-prompts` prompts x `--step-n` rollouts of up to
`--new-tokens` tokens at temperature 1, once with `grpo.rollout_path` "generate" (TRL's generation, each
prompt prefilled n times) and once with "group_prefill", each from a copy of the same initial weights with
the same data and seed. Prompts are text of about `--step-prompt-len` tokens cut from the tokenizer
corpus; the tokenizer is the tiny models' locally trained BPE (a model folder brings its own). Sampled
rollouts of two generation paths draw different tokens, so `tokens_equal` is null. Besides `train()` on
both clocks, rows carry the generation's own CPU seconds (`generation_cpu_s_*`), the rest of the step's
(`rest_cpu_s_*`: rewards, the update) and the trainer's wall-clock rollout / update timers.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
from pathlib import Path
from typing import Any

PATHS = {"today": "generate", "new": "group_prefill"}


def tokenizer_for(label: str) -> Any:
    """A model folder's tokenizer, else the tiny models' BPE trained on the built-in corpus (ids past its
    vocabulary decode to nothing, which only shortens the completions' text for the reward)."""
    from transformers import AutoTokenizer

    from tooltune.models.corpus import example_texts
    from tooltune.models.tokenizer import train_tokenizer

    if Path(label).is_dir():
        tok = AutoTokenizer.from_pretrained(label)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        return tok
    return train_tokenizer(example_texts(seed=0), 1024)


def prompts(tok: Any, count: int, length: int) -> list[str]:
    """`count` different texts of about `length` tokens each, consecutive windows of the corpus."""
    from tooltune.models.corpus import example_texts

    ids = tok("\n".join(example_texts(seed=1)), add_special_tokens=False)["input_ids"]
    while len(ids) < count * length:
        ids = ids + ids
    return [tok.decode(ids[i * length : (i + 1) * length]) for i in range(count)]


def reward_length_parity(completions: list[str], **_: Any) -> list[float]:
    """A cheap reward with spread across a group (the step's cost is not the reward's)."""
    return [float(len(c) % 2) for c in completions]


def train_steps(model: Any, tok: Any, texts: list[str], rollout_path: str, args: argparse.Namespace) -> dict:
    """`args.steps` trainer steps from `model` (a copy is trained): the CPU and wall seconds of `train()`,
    each step's wall seconds, and the trainer's rollout and update timers."""
    import torch  # deferred: torch takes seconds to import
    from datasets import Dataset
    from rollout import timed_call  # bench/rollout.py: both clocks
    from train_overhead import StepTimer  # bench/train_overhead.py: wall time between optimizer steps
    from trl import GRPOConfig

    from tooltune.training.grpo import ToolTuneGRPOTrainer

    with tempfile.TemporaryDirectory() as out:
        cfg = GRPOConfig(
            output_dir=out, num_generations=args.step_n, max_steps=args.steps,
            per_device_train_batch_size=args.step_prompts * args.step_n,
            max_completion_length=args.new_tokens,
            learning_rate=1e-6, temperature=1.0, top_p=1.0, top_k=0, use_cpu=not torch.cuda.is_available(),
            bf16=False, activation_checkpointing=False, report_to="none", save_strategy="no", logging_steps=1,
            disable_tqdm=True, seed=args.seed, beta=0.0,
        )
        trainer = ToolTuneGRPOTrainer(
            model=copy.deepcopy(model), reward_funcs=[reward_length_parity], args=cfg,
            train_dataset=Dataset.from_list([{"prompt": t} for t in texts]), processing_class=tok,
            shared_prefix=True, shared_prefix_path="packed", rollout_path=rollout_path,
        )
        generation_cpu: list[float] = []
        generate = trainer._generate_single_turn

        def timed_generation(*a: Any, **kw: Any) -> Any:  # the generation's CPU seconds, rollout by rollout
            out, seconds = timed_call(lambda: generate(*a, **kw))
            generation_cpu.append(seconds["cpu"])
            return out

        trainer._generate_single_turn = timed_generation
        timer = StepTimer()
        trainer.add_callback(timer.callback)
        _, train_s = timed_call(trainer.train)
    logs = [r for r in trainer.state.log_history if "tooltune/rollout_time" in r]
    tokens = sum(r["completions/mean_length"] * r["tooltune/rollouts_generated"] for r in logs)
    return {
        "train_s": train_s,
        "generation_cpu_s": sum(generation_cpu),
        "step_s": timer.times,
        "rollout_s": [r["tooltune/rollout_time"] for r in logs],
        "update_s": [r["tooltune/update_time"] for r in logs],
        "packed_update": [r.get("tooltune/packed_update") for r in logs],
        "group_prefill": [r.get("tooltune/rollout_group_prefill") for r in logs],
        "tokens": tokens,
    }


def step_cell(model: Any, label: str, args: argparse.Namespace) -> dict[str, Any]:
    from rollout import row  # bench/rollout.py: the row layout every case shares

    tok = tokenizer_for(label)
    texts = prompts(tok, args.step_prompts * args.steps, args.step_prompt_len)
    model.train()
    runs: dict[str, dict] = {}
    for key in ("today", "new") if args.seed % 2 == 0 else ("new", "today"):
        runs[key] = train_steps(model, tok, texts, PATHS[key], args)
    model.eval()
    # the CPU clock spans train() (its own set-up is a small part of a step); the wall clock the steps alone
    seconds = {k: v["train_s"]["cpu"] if args.clock == "cpu" else sum(v["step_s"]) for k, v in runs.items()}
    timed = {"seconds": seconds, "clock": args.clock,
             "all_seconds": {k: {"train": v["train_s"], "steps_wall": v["step_s"]} for k, v in runs.items()}}
    tokens = {k: round(v["tokens"]) for k, v in runs.items()}
    prompt_len = round(statistics.mean(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts))
    extra = {f"{part}_{k}": sum(v[part]) for k, v in runs.items() for part in ("rollout_s", "update_s")}
    extra.update({f"generation_cpu_s_{k}": v["generation_cpu_s"] for k, v in runs.items()})
    extra.update({f"rest_cpu_s_{k}": v["train_s"]["cpu"] - v["generation_cpu_s"] for k, v in runs.items()})
    extra.update(speedup=timed["seconds"]["today"] / timed["seconds"]["new"],
                 rollout_speedup=extra["rollout_s_today"] / extra["rollout_s_new"])
    extra.update({f"group_prefill_{k}": v["group_prefill"] for k, v in runs.items()},
                 packed_update={k: v["packed_update"] for k, v in runs.items()},
                 prompts_per_step=args.step_prompts, steps=args.steps, temperature=1.0)
    return row("step", label, prompt_len, args.step_n, args.new_tokens, timed, tokens, None, **extra)
