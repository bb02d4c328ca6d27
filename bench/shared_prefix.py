"""Policy-update time of the ordinary update and the two shared-prefix paths, checkpointing on and off.

One GRPO step's log-probs on a CPU tiny model: forward + backward of a GRPO-style loss
(-sum(advantage * logp over the completion mask) / tokens) over `groups` prompts x n rollouts, computed

- `ordinary`: one forward of cat(prompt, completion) per row, as TRL runs it (`ordinary_logps`);
- `kv_cache`: each group's prompt once with a KV cache, repeated to its rows, then the completions on it
  (`grouped_logps(path="kv_cache")`; it cannot run under activation checkpointing);
- `packed`: each group packed into one row of one forward with an attention pattern that keeps the
  completions apart (`grouped_logps(path="packed")`), its attention computed block by block by the
  registered `tooltune_packed` function;
- `packed_dense`: the same packed forward with the pattern as one dense boolean mask given to plain sdpa,
  which computes every pair of the packed row,

each with activation checkpointing off and (ordinary, packed) on. All variants run on the same batch
in every round, in an order rotated from round to round, and each cell keeps the best of `--repeats`
rounds. The largest |gradient difference| over all parameters and the largest |log-prob difference|
against the ordinary path without checkpointing are reported per variant.

The model is the `small` tiny size (Qwen2, hidden 128, 2 layers, sdpa attention) with
max_position_embeddings raised to fit the longest prompt + completion; prompts are random token ids of
exactly the given length (no tokenizer), completions 64-128 random tokens right-padded to 128, so every
path carries the padding mask TRL passes.

Run: python bench/shared_prefix.py [--quick] [--out results.json]   (or: tooltune bench shared_prefix)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_model(size: str, max_len: int, seed: int = 0) -> Any:
    from tooltune.models import SIZES
    from tooltune.models.tiny import tiny_model

    spec = SIZES[size]
    spec = dataclasses.replace(spec, max_position_embeddings=max(max_len, spec.max_position_embeddings))
    return tiny_model(spec, seed).eval()  # dropout off; the tiny model has none, eval keeps it explicit


def make_batch(vocab: int, groups: int, n: int, prompt_len: int, completion: int, seed: int) -> dict:
    import torch

    g = torch.Generator().manual_seed(seed)
    prompt_ids = torch.randint(1, vocab, (groups, prompt_len), generator=g).repeat_interleave(n, dim=0)
    rows = groups * n
    lengths = torch.randint(completion // 2, completion + 1, (rows,), generator=g)
    lengths[0] = completion
    completion_mask = (torch.arange(completion) < lengths[:, None]).long()
    completion_ids = torch.randint(1, vocab, (rows, completion), generator=g)
    completion_ids = completion_ids.masked_fill(completion_mask == 0, 0)
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.randn(rows, generator=g),
    }


VARIANTS = (
    ("ordinary", False),
    ("kv_cache", False),
    ("packed", False),
    ("packed_dense", False),
    ("ordinary", True),
    ("packed", True),
)
"""(path, activation checkpointing) pairs; the KV cache cannot cross checkpointed layers."""


def set_checkpointing(model: Any, on: bool) -> None:
    """Activation checkpointing on (training mode, where it acts) or off (eval mode); the tiny model has no
    dropout, so both modes compute the same values."""
    if on:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        model.train()
    else:
        model.activation_checkpointing_disable()
        model.eval()


def update(model: Any, batch: dict, path: str) -> tuple[float, Any, dict]:
    """Forward + backward of one step's loss; (seconds, detached log-probs, gradients)."""
    from tooltune.training.shared_prefix import grouped_logps, ordinary_logps
    from tooltune.training.shared_prefix.packed_attention import NAME, register

    register()
    args = [batch[k] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")]
    model.set_attn_implementation("sdpa" if path == "packed_dense" else NAME)
    model.zero_grad(set_to_none=True)
    t0 = time.perf_counter()
    if path == "ordinary":
        logps, _ = ordinary_logps(model, *args)
    else:
        out = grouped_logps(model, *args, path=path.removesuffix("_dense"))
        assert out.fallback is None, out.fallback
        logps = out.logps
    mask = batch["completion_mask"].float()
    loss = -(batch["advantages"][:, None] * logps * mask).sum() / mask.sum()
    loss.backward()
    seconds = time.perf_counter() - t0
    grads = {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return seconds, logps.detach(), grads


def name(path: str, checkpointing: bool) -> str:
    return f"{path}{'+ckpt' if checkpointing else ''}"


def measure(model: Any, prompt_len: int, n: int, args: argparse.Namespace) -> dict[str, Any]:
    vocab, seed = model.config.vocab_size, prompt_len + n
    batch = make_batch(vocab, args.groups, n, prompt_len, args.completion, seed)
    times: dict[str, list[float]] = {name(*v): [] for v in VARIANTS}
    grad_diff = dict.fromkeys(times, 0.0)
    logp_diff = dict.fromkeys(times, 0.0)
    for r in range(args.repeats):
        order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]  # rotate who goes first
        results = {}
        for path, ckpt in order:
            set_checkpointing(model, ckpt)
            seconds, logps, grads = update(model, batch, path)
            times[name(path, ckpt)].append(seconds)
            results[name(path, ckpt)] = (logps, grads)
        ref_logps, ref_grads = results["ordinary"]
        for key, (logps, grads) in results.items():
            diff = max((grads[k] - g).abs().max().item() for k, g in ref_grads.items())
            grad_diff[key] = max(grad_diff[key], diff)
            logp_diff[key] = max(logp_diff[key], (logps - ref_logps).abs().max().item())
    set_checkpointing(model, False)
    best = {k: min(v) for k, v in times.items()}
    row = {
        "prompt_len": prompt_len,
        "n": n,
        "groups": args.groups,
        "completion": args.completion,
        "seconds": best,
        "all_seconds": times,
        "kv_cache_ratio": best["ordinary"] / best["kv_cache"],
        "packed_ratio": best["ordinary"] / best["packed"],
        "packed_dense_ratio": best["ordinary"] / best["packed_dense"],
        "packed_ckpt_ratio": best["ordinary+ckpt"] / best["packed+ckpt"],
        "max_grad_diff": grad_diff,
        "max_logp_diff": logp_diff,
        "token_ratio": (prompt_len + args.completion) * n / (prompt_len + (args.completion + 1) * n),
    }
    worst_grad = max(grad_diff.values())
    worst_logp = max(logp_diff.values())
    print(
        f"| {prompt_len} | {n} | {best['ordinary']:.3f} | {best['kv_cache']:.3f} | {best['packed']:.3f} "
        f"| {best['packed_dense']:.3f} | {best['ordinary+ckpt']:.3f} | {best['packed+ckpt']:.3f} "
        f"| {row['kv_cache_ratio']:.2f}x | {row['packed_ratio']:.2f}x | {row['packed_dense_ratio']:.2f}x "
        f"| **{row['packed_ckpt_ratio']:.2f}x** | {row['token_ratio']:.1f}x "
        f"| {worst_grad:.1e} | {worst_logp:.1e} |",
        flush=True,
    )
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompt-lens", type=int, nargs="+", default=[128, 512, 1024, 2048])
    p.add_argument("--ns", type=int, nargs="+", default=[8, 16], help="rollouts per prompt")
    p.add_argument("--groups", type=int, default=2, help="prompts per step")
    p.add_argument("--completion", type=int, default=128, help="completion width (lengths 1/2..1 of it)")
    p.add_argument("--repeats", type=int, default=3, help="rounds per cell; the best is kept")
    p.add_argument("--size", default="small", help="tiny-model size (tooltune.models.SIZES)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="prompts 128/512, n 8, 2 rounds")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args()
    if args.quick:
        args.prompt_lens, args.ns, args.repeats = [128, 512], [8], 2

    import torch

    torch.set_num_threads(args.threads)
    model = build_model(args.size, max(args.prompt_lens) + args.completion + 1)
    params = sum(q.numel() for q in model.parameters())
    print(
        f"# policy-update time: {args.size} tiny model ({params} parameters), {args.groups} prompts per "
        f"step, completions {args.completion // 2}-{args.completion} tokens, best of {args.repeats}, "
        f"torch {torch.__version__}, {args.threads} threads; ckpt = activation checkpointing; speed-up = "
        "ordinary s / its s"
    )
    print(
        "| prompt tokens | n | ordinary s | kv_cache s | packed s | packed_dense s | ordinary+ckpt s "
        "| packed+ckpt s | kv_cache speed-up | packed speed-up | packed_dense speed-up "
        "| packed+ckpt speed-up over ordinary+ckpt | token ratio | max abs grad diff | max abs logp diff |"
    )
    print("| --- " * 15 + "|")
    rows = [measure(model, length, n, args) for length in args.prompt_lens for n in args.ns]
    if args.out:
        meta = {k: v for k, v in vars(args).items() if k != "out"}
        meta.update(torch=torch.__version__, parameters=params)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"config": meta, "rows": rows}, indent=1), encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
