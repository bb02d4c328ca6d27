"""Training-loop overhead and down-sampling savings, measured side by side in one run.

1. Per-step time of tooltune's GRPO trainer with both techniques off (diagnostics on, as shipped) vs
   TRL's plain `GRPOTrainer`, same model, data, seed and config; rounds interleave the two so load on
   the machine hits both alike. Target: overhead <= 5%.
2. Policy-update time (forward + backward of the kept rollouts, `tooltune/update_time`) with
   max-variance down-sampling to m = n/2 and m = n/4, as ratios to m = n.

Run: python bench/train_overhead.py [--rounds 3] [--steps 6] [--size small] [--n 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rows(n_prompts: int, seed: int = 0) -> list[dict[str, Any]]:
    from tooltune.data.synthetic import SynthConfig, generate
    from tooltune.prompts import PromptControls
    from tooltune.schema import Sample
    from tooltune.training.data import grpo_rows

    # few distractor tools keep prompts short: the bench measures the trainer, not long-context cost
    cfg = SynthConfig(n=n_prompts, seed=seed, min_distractors=0, max_distractors=1)
    samples = [Sample.from_dict(r) for r in generate(cfg)]
    return grpo_rows(samples, PromptControls("tool_n1", system_prompt="Tools:\n{tools}"))


def corpus(data: list[dict]) -> list[str]:
    """Tokenizer corpus: the prompts and answers themselves, so they tokenize compactly."""
    return [m["content"] for r in data for m in r["prompt"]] + [r["answer"] for r in data]


def reward_funcs() -> list[Any]:
    from tooltune.integrations.trl.reward import TRLRewardFunction
    from tooltune.rewards import CompositeReward

    return [TRLRewardFunction(CompositeReward({"binary": 1.0}, template="tool_n1"))]


class StepTimer:
    """Wall time between consecutive optimizer steps (the first step, with warm-up, is dropped)."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        timer = self

        class _CB(TrainerCallback):
            def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                timer.t = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                timer.times.append(time.perf_counter() - timer.t)

            def on_log(
                self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any
            ) -> None:
                if logs and "tooltune/update_time" in logs:
                    timer.updates.append(logs["tooltune/update_time"])

        self.callback, self.times, self.updates, self.t = _CB(), [], [], 0.0


def run_trainer(
    kind: str, model_dir: Path, data: list[dict], args: argparse.Namespace, m: int | None = None
) -> dict[str, Any]:
    """Train `args.steps` steps; step and update times without the first (warm-up) step."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from tooltune.training.diagnostics import RegionTagger
    from tooltune.training.grpo import ToolTuneGRPOTrainer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with tempfile.TemporaryDirectory() as out:
        cfg = GRPOConfig(
            output_dir=out,
            num_generations=args.n,
            per_device_train_batch_size=args.prompts * args.n,
            max_steps=args.steps,
            max_completion_length=args.max_completion,
            learning_rate=1e-4,
            temperature=1.0,
            use_cpu=True,
            bf16=False,
            gradient_checkpointing=False,
            report_to="none",
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            seed=0,
        )
        common = {
            "model": model,
            "reward_funcs": reward_funcs(),
            "args": cfg,
            "train_dataset": Dataset.from_list(data),
            "processing_class": tok,
        }
        if kind == "trl":
            trainer = GRPOTrainer(**common)
        else:
            trainer = ToolTuneGRPOTrainer(**common, downsample_m=m, region_fn=RegionTagger(tok, "tool_n1"))
        timer = StepTimer()
        trainer.add_callback(timer.callback)
        trainer.train()
    own = trainer.tooltune.own_seconds if kind != "trl" else 0.0
    return {"steps": timer.times[1:], "updates": timer.updates[1:], "own": own, "total": sum(timer.times)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per variant")
    ap.add_argument("--steps", type=int, default=6, help="optimizer steps per run (first one dropped)")
    ap.add_argument("--size", default="small", help="tiny model size (tooltune.models.SIZES)")
    ap.add_argument("--n", type=int, default=8, help="rollouts per prompt")
    ap.add_argument("--prompts", type=int, default=4, help="prompts per step")
    ap.add_argument("--max-completion", type=int, default=48)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    import torch

    from tooltune.models import build_tiny_model

    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        data = rows(args.prompts * args.steps * 2)
        model_dir = build_tiny_model(Path(tmp) / "model", size=args.size, seed=0, corpus=corpus(data))
        lengths = [len(r["prompt"][0]["content"]) + len(r["prompt"][-1]["content"]) for r in data]
        print(f"{len(data)} prompts, {statistics.mean(lengths):.0f} characters on average", flush=True)
        plain: list[float] = []
        ours: list[float] = []
        own = total = 0.0
        updates: dict[int, list[float]] = {args.n: [], args.n // 2: [], args.n // 4: []}
        for r in range(args.rounds):
            t0 = time.perf_counter()
            plain += run_trainer("trl", model_dir, data, args)["steps"]
            for m in updates:
                res = run_trainer("tooltune", model_dir, data, args, m=None if m == args.n else m)
                updates[m] += res["updates"]
                if m == args.n:  # both techniques off
                    ours += res["steps"]
                    own, total = own + res["own"], total + res["total"]
            print(f"round {r + 1}/{args.rounds} done in {time.perf_counter() - t0:.0f} s", flush=True)
    med = statistics.median
    overhead = med(ours) / med(plain) - 1
    base = med(updates[args.n])
    result = {
        "model_size": args.size,
        "n": args.n,
        "prompts_per_step": args.prompts,
        "steps_measured": len(plain),
        "step_seconds_trl": med(plain),
        "step_seconds_tooltune": med(ours),
        "overhead": overhead,
        "own_code_share": own / total,
        "update_seconds": {f"m={m}": med(v) for m, v in updates.items()},
        "update_ratio": {f"m={m}": med(v) / base for m, v in updates.items()},
    }
    print(
        f"\nper-step time (median of {len(plain)} steps): TRL GRPOTrainer {med(plain):.3f} s, "
        f"tooltune trainer (techniques off) {med(ours):.3f} s -> overhead {overhead * 100:+.1f}%"
    )
    print(
        f"time in tooltune's own hook code: {own:.2f} s of {total:.1f} s training = {own / total * 100:.2f}%"
    )
    for m, v in updates.items():
        print(f"policy-update time m={m} of n={args.n}: {med(v):.3f} s  ratio to m=n: {med(v) / base:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
