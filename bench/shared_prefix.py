"""Policy-update time with each group's prompt run once (shared prefix) vs once per rollout (ordinary).

One GRPO step's log-probs on a CPU tiny model: forward + backward of a GRPO-style loss
(-sum(advantage * logp over the completion mask) / tokens) over `groups` prompts x n rollouts, with
`tooltune.training.shared_prefix.grouped_logps` against `ordinary_logps` (one forward of
cat(prompt, completion) per row, as TRL runs it). Both run on the same batch in the same round, in
alternating order, and each cell keeps the best of `--repeats` rounds. The largest |gradient
difference| over all parameters and the largest |log-prob difference| of the two are reported per cell.

The model is the `small` tiny size (Qwen2, hidden 128, 2 layers) with max_position_embeddings raised to
fit the longest prompt + completion; prompts are random token ids of exactly the given length (no
tokenizer), completions 64-128 random tokens right-padded to 128, so the ordinary path carries the
padding mask TRL passes.

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


def update(model: Any, batch: dict, shared: bool) -> tuple[float, Any, dict]:
    """Forward + backward of one step's loss; (seconds, detached log-probs, gradients)."""
    from tooltune.training.shared_prefix import grouped_logps, ordinary_logps

    args = [batch[k] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")]
    model.zero_grad(set_to_none=True)
    t0 = time.perf_counter()
    if shared:
        out = grouped_logps(model, *args)
        assert out.fallback is None, out.fallback
        logps = out.logps
    else:
        logps, _ = ordinary_logps(model, *args)
    mask = batch["completion_mask"].float()
    loss = -(batch["advantages"][:, None] * logps * mask).sum() / mask.sum()
    loss.backward()
    seconds = time.perf_counter() - t0
    grads = {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return seconds, logps.detach(), grads


def measure(model: Any, prompt_len: int, n: int, args: argparse.Namespace) -> dict[str, Any]:
    vocab, seed = model.config.vocab_size, prompt_len + n
    batch = make_batch(vocab, args.groups, n, prompt_len, args.completion, seed)
    ordinary, shared, grad_diff, logp_diff = [], [], 0.0, 0.0
    for r in range(args.repeats):
        first_shared = r % 2 == 1  # alternate which runs first
        for is_shared in (first_shared, not first_shared):
            s, logps, grads = update(model, batch, is_shared)
            (shared if is_shared else ordinary).append(s)
            if is_shared:
                res_shared = (logps, grads)
            else:
                res_ordinary = (logps, grads)
        grad_diff = max(
            grad_diff, max((res_shared[1][k] - g).abs().max().item() for k, g in res_ordinary[1].items())
        )
        logp_diff = max(logp_diff, (res_shared[0] - res_ordinary[0]).abs().max().item())
    row = {
        "prompt_len": prompt_len,
        "n": n,
        "groups": args.groups,
        "completion": args.completion,
        "ordinary_s": min(ordinary),
        "shared_s": min(shared),
        "ratio": min(ordinary) / min(shared),
        "max_grad_diff": grad_diff,
        "max_logp_diff": logp_diff,
        "token_ratio": (prompt_len + args.completion) * n / (prompt_len + (args.completion + 1) * n),
        "ordinary_all_s": ordinary,
        "shared_all_s": shared,
    }
    print(
        f"| {prompt_len} | {n} | {row['ordinary_s']:.3f} | {row['shared_s']:.3f} | **{row['ratio']:.2f}×** "
        f"| {row['token_ratio']:.1f}× | {grad_diff:.1e} | {logp_diff:.1e} |",
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
        f"# shared-prefix update time: {args.size} tiny model ({params} parameters), {args.groups} prompts "
        f"per step, completions {args.completion // 2}-{args.completion} tokens, best of {args.repeats}, "
        f"torch {torch.__version__}, {args.threads} threads"
    )
    print("| prompt tokens | n | ordinary s | shared s | ratio | token ratio | max abs grad diff "
          "| max abs logp diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
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
