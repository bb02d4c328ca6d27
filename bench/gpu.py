"""GPU benchmark: the policy update at Qwen2.5 shapes, GRPO training, and the mini quickstart on CUDA.

One offline command (no model hub: every model is built from a config with random weights, and every
figure below is of an untrained model). Parts (`--parts`, all by default):

- `peak`: the measured peak of the device, dense bf16 matmuls (float32 on CPU), TFLOP/s;
- `update`: the GRPO policy update (forward + backward of -sum(advantage * logp) / tokens through TRL's
  fused LM head, as the trainer runs it) at the Qwen2.5 0.5B / 1.5B / 3B shapes with the real vocabulary
  (151,936), 2 prompts per step of 1024 and 2048 tokens, n 8 and 16, completions 128-256 tokens, all
  rows in one forward, bf16, each of
    ordinary      one forward of prompt + completion per row (TRL's way)
    kv_cache      each prompt once, its KV cache reused by the completions (two model calls)
    packed        each group packed into one row of one forward, attention by `tooltune_packed`
                  (sdpa block by block)
    packed_flex   the same with the model on flex_attention and the pattern as a BlockMask
  with activation checkpointing off and on (the KV cache cannot cross checkpointed layers): seconds (best
  of the timed rounds after one warm-up), MFU (the variant's own FLOPs, recomputation not counted, over
  the measured peak), peak memory, and an out-of-memory error recorded as the cell's result;
- `train`: `tooltune train` GRPO for a few steps (`--train-steps`) at the 0.5B body (the quickstart
  tokenizer's vocabulary) on the efficiency paper's regime (configs/quickstart_efficiency_paper.yaml:
  prompts of ~500 tokens of tool documentation), 16 prompts x 8 rollouts of up to 256 tokens: rollout /
  update time split, generation tokens/s, and the update path and checkpointing the run chose;
- `quickstart`: the mini quickstart (configs/quickstart_mini.yaml) end to end, wall time per stage;
- `rollout`: bench/rollout.py on the device (float32): today's generation against group prefill and
  kept episode caches at the tiny and SmolLM2-135M shapes, 512 / 1024 / 2048-token prompts, n 8 and 16,
  128 new tokens, a 6-turn episode, whole GRPO steps; equal tokens and log-probs checked in the same run.

Results go to `--out` as gpu.json and gpu.md (the markdown table), with the device, versions and date.
A full run takes about 8 minutes on one H100 or H200 (`--budget-s` bounds the update part: cells past it
are recorded as skipped). `--quick` runs the same code at tiny shapes on whatever device there is (the
tests run it on CPU); its figures measure nothing.

Run: python bench/gpu.py [--quick] [--out DIR] [--parts peak,update,train,quickstart]
     (or: tooltune bench gpu ...)
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

QWEN25 = {  # hidden, MLP width, layers, attention heads, key/value heads (the Qwen2.5 configs)
    "0.5B": (896, 4864, 24, 14, 2),
    "1.5B": (1536, 8960, 28, 12, 2),
    "3B": (2048, 11008, 36, 16, 2),
}
TINY = {"tiny": (64, 128, 2, 4, 2)}
VOCAB = 151936
VARIANTS = (  # most informative first: the time budget cuts from the end
    ("ordinary", True),
    ("packed", True),
    ("kv_cache", False),
    ("ordinary", False),
    ("packed", False),
    ("packed_flex", True),
    ("packed_flex", False),
)
PARTS = ("peak", "update", "train", "quickstart", "rollout")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/bench_gpu", help="folder for gpu.json and gpu.md")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {', '.join(PARTS)}")
    ap.add_argument("--shapes", nargs="+", default=list(QWEN25), help="Qwen2.5 shapes of the update part")
    ap.add_argument("--prompt-lens", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--ns", type=int, nargs="+", default=[8, 16], help="rollouts per prompt")
    ap.add_argument("--completion", type=int, default=256, help="completion width (lengths 1/2..1 of it)")
    ap.add_argument("--repeats", type=int, default=2, help="timed rounds per cell after one warm-up")
    ap.add_argument("--budget-s", type=float, default=300.0, help="time for the update part's cells")
    ap.add_argument("--train-steps", type=int, default=4, help="GRPO steps of the train part")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny shapes, seconds: a smoke test (CPU tests)")
    args = ap.parse_args(argv)
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        ap.error(f"--parts: unknown {sorted(unknown)}; choose from {list(PARTS)}")
    if args.quick:
        args.shapes, args.prompt_lens, args.ns, args.completion = ["tiny"], [48], [4], 16
        args.repeats, args.train_steps = 1, 1
    return args


def device_info() -> dict[str, Any]:
    import torch  # deferred: torch takes seconds to import
    import transformers
    import trl

    cuda = torch.cuda.is_available()
    return {
        "device": torch.cuda.get_device_name(0) if cuda else f"CPU ({platform.processor() or 'unknown'})",
        "cuda": cuda,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "date": datetime.date.today().isoformat(),
    }


def sync() -> None:
    import torch  # deferred: torch takes seconds to import

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def measure_peak(quick: bool) -> dict[str, Any]:
    """Dense matmul throughput: bf16 8192^3 on CUDA (float32 512^3 on CPU), best of 5 rounds of 10."""
    import torch  # deferred: torch takes seconds to import

    cuda = torch.cuda.is_available()
    size = 512 if quick or not cuda else 8192
    dtype = torch.bfloat16 if cuda else torch.float32
    a = torch.randn(size, size, device="cuda" if cuda else "cpu", dtype=dtype)
    b = torch.randn_like(a)
    best = float("inf")
    for _ in range(5):
        sync()
        t0 = time.perf_counter()
        for _ in range(10):
            a @ b
        sync()
        best = min(best, (time.perf_counter() - t0) / 10)
    return {"tflops": 2 * size**3 / best / 1e12, "dtype": str(dtype).removeprefix("torch."), "size": size}


def build_model(dims: tuple[int, ...], vocab: int, max_len: int, seed: int) -> Any:
    """A randomly initialised Qwen2 causal LM of these dimensions on the device (bf16 on CUDA), with TRL's
    fused LM head (as the trainer patches the policy), running `tooltune_packed`."""
    import torch  # deferred: torch takes seconds to import
    from transformers import Qwen2Config, Qwen2ForCausalLM  # deferred: as above
    from trl.trainer.utils import add_fused_lm_head  # deferred: as above

    from tooltune.training.shared_prefix.packed_attention import use_packed_attention

    hidden, mlp, layers, heads, kv = dims
    config = Qwen2Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=max_len,
        tie_word_embeddings=True, attn_implementation="sdpa",  # Qwen2.5 up to 3B ties its embeddings
    )
    cuda = torch.cuda.is_available()
    old = torch.get_default_dtype()
    torch.manual_seed(seed)
    try:
        torch.set_default_dtype(torch.bfloat16 if cuda else torch.float32)
        with torch.device("cuda" if cuda else "cpu"):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(old)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    use_packed_attention(model)
    return model.train()


def flops(dims: tuple[int, ...], vocab: int, groups: int, n: int, prompt: int, completion: int,
          shared: bool) -> float:
    """Forward + backward FLOPs of one update (3x the forward): the layers' matmuls over the tokens the
    variant runs, the attention over the causal pairs it needs, the LM head over the completions."""
    hidden, mlp, layers, heads, kv = dims
    head_dim = hidden // heads
    per_token = 2 * (hidden * head_dim * (2 * heads + 2 * kv) + 3 * hidden * mlp)
    rows = groups * n
    if shared:
        tokens = groups * prompt + rows * (completion + 1)
        pairs = groups * prompt * (prompt + 1) / 2 + rows * (completion + 1) * (prompt + (completion + 2) / 2)
    else:
        length = prompt + completion
        tokens, pairs = rows * length, rows * length * (length + 1) / 2
    head = 2 * hidden * vocab * rows * completion
    forward = layers * (per_token * tokens + 4 * heads * head_dim * pairs) + head
    return 3 * forward


def update_cell(model: Any, batch: dict, path: str, checkpointing: bool, repeats: int) -> dict[str, Any]:
    """Best seconds and peak memory of `repeats` timed updates after one warm-up, or the error."""
    import torch  # deferred: torch takes seconds to import

    from tooltune.training.shared_prefix import grouped_logps, ordinary_logps
    from tooltune.training.shared_prefix.packed_attention import NAME

    model.set_attn_implementation("flex_attention" if path == "packed_flex" else NAME)
    if checkpointing:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.activation_checkpointing_disable()
    args = [batch[k] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")]
    mask = batch["completion_mask"].float()
    cuda = torch.cuda.is_available()
    times = []
    try:
        for _ in range(repeats + 1):
            model.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            sync()
            t0 = time.perf_counter()
            if path == "ordinary":
                logps, _ = ordinary_logps(model, *args, fused_lm_head=True)
            else:
                out = grouped_logps(model, *args, fused_lm_head=True, path=path.removesuffix("_flex"))
                if out.fallback is not None:
                    return {"status": f"fell back: {out.fallback}"}
                logps = out.logps
            loss = -(batch["advantages"][:, None] * logps * mask).sum() / mask.sum()
            loss.backward()
            sync()
            times.append(time.perf_counter() - t0)
            del logps, loss
    except torch.OutOfMemoryError:
        return {"status": "out of memory"}
    except (RuntimeError, NotImplementedError) as e:  # e.g. flex_attention without a backward on CPU
        return {"status": f"error: {str(e).splitlines()[0][:160]}"}
    finally:
        model.zero_grad(set_to_none=True)
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    peak = torch.cuda.max_memory_allocated() / 1024**3 if cuda else None
    return {"status": "ok", "seconds": min(times[1:]), "all_seconds": times[1:], "peak_gib": peak}


def update_part(args: argparse.Namespace, peak_tflops: float) -> list[dict[str, Any]]:
    import torch  # deferred: torch takes seconds to import
    from shared_prefix import make_batch  # bench/shared_prefix.py: random prompts, right-padded completions

    shapes = TINY if args.quick else QWEN25
    vocab = 1024 if args.quick else VOCAB
    device = "cuda" if torch.cuda.is_available() else "cpu"
    deadline = time.perf_counter() + args.budget_s
    rows = []
    for shape in args.shapes:
        dims = shapes[shape]
        model = build_model(dims, vocab, max(args.prompt_lens) + args.completion + 1, args.seed)
        for prompt in args.prompt_lens:
            for n in args.ns:
                batch = make_batch(vocab, 2, n, prompt, args.completion, args.seed)
                batch = {k: v.to(device) for k, v in batch.items()}
                for path, ckpt in VARIANTS:
                    row = {"shape": shape, "prompt": prompt, "n": n, "path": path, "checkpointing": ckpt}
                    if path == "packed_flex" and device == "cpu":
                        row["status"] = "skipped: flex_attention has no backward on CPU"
                    elif time.perf_counter() > deadline:
                        row["status"] = "skipped: time budget (--budget-s)"
                    else:
                        row.update(update_cell(model, batch, path, ckpt, args.repeats))
                    if row.get("seconds"):
                        work = flops(dims, vocab, 2, n, prompt, args.completion, path != "ordinary")
                        row["mfu"] = work / row["seconds"] / (peak_tflops * 1e12)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        del model
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def train_part(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """A few GRPO steps of `tooltune train` at the 0.5B body in the paper's regime (see the docstring)."""
    from transformers import AutoConfig, AutoTokenizer, Qwen2ForCausalLM  # deferred: heavy

    from tooltune.config import set_key
    from tooltune.experiment.config import load_config
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.training.diagnostics import grpo_summary, read_metrics
    from tooltune.training.runner import train

    sizes = {"task.n_train": 64 if args.quick else 512, "task.n_val": 8, "task.n_heldout": 8,
             "task.n_unseen": 4}
    qcfg = load_config(ROOT / "configs" / "quickstart_efficiency_paper.yaml",
                       {"seed": args.seed, "threads": args.threads, **sizes})
    base = Pipeline(out / "train_task", qcfg, say=lambda s: None)
    base.run(stop_after="model")  # the task data and the tokenizer (the tiny model is not used)
    body = out / "train_model"
    config = AutoConfig.from_pretrained(base.model_dir("base"))
    hidden, mlp, layers, heads, kv = TINY["tiny"] if args.quick else QWEN25["0.5B"]
    config.update({"hidden_size": hidden, "intermediate_size": mlp, "num_hidden_layers": layers,
                   "num_attention_heads": heads, "num_key_value_heads": kv, "max_position_embeddings": 4096})
    Qwen2ForCausalLM(config).save_pretrained(body)
    AutoTokenizer.from_pretrained(base.model_dir("base")).save_pretrained(body)
    tcfg = base.train_config("grpo")
    per_step = 2 if args.quick else 16
    for key, value in {
        "model.name_or_path": str(body), "run.output_dir": str(out / "train_run"), "run.device": "auto",
        "run.save_steps": 10**9, "data.val": "", "diagnostics.eval_samples": 0,
        "grpo.max_steps": args.train_steps, "grpo.prompts_per_step": per_step, "grpo.num_generations": 8,
        "grpo.per_device_batch_size": 16, "grpo.max_completion_length": 16 if args.quick else 256,
    }.items():
        set_key(tcfg, key, value)
    t0 = time.perf_counter()
    run = train(tcfg.validate())
    wall = time.perf_counter() - t0
    summary = grpo_summary(run / "metrics.jsonl")
    records = read_metrics(run / "metrics.jsonl", "grpo")
    generated = sum(r.get("completions/mean_length", 0.0) * r.get("tooltune/rollouts_generated", 0.0)
                    for r in records)
    plan = json.loads((run / "summary.json").read_text()).get("update_plan")
    packed = [r["tooltune/packed_update"] for r in records if "tooltune/packed_update" in r]
    return {
        "parameters": sum(p.numel() for p in Qwen2ForCausalLM.from_pretrained(body).parameters()),
        "steps": summary["steps"], "wall_s": wall, "rollout_s": summary["rollout_s"],
        "update_s": summary["update_s"], "generated_tokens": generated,
        "generation_tokens_per_s": generated / summary["rollout_s"] if summary["rollout_s"] else None,
        "update_plan": plan, "packed_update_share": sum(packed) / len(packed) if packed else None,
    }


def quickstart_part(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The mini quickstart end to end: wall time per stage."""
    from tooltune.experiment.config import load_config
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.synthetic import STAGES

    cfg = load_config(ROOT / "configs" / "quickstart_mini.yaml", {"seed": args.seed, "threads": args.threads})
    pipe = Pipeline(out / "quickstart", cfg, say=lambda s: None)
    t0 = time.perf_counter()
    pipe.run()
    stages = {name: pipe.result(name)["timing"]["wall_s"] for name in STAGES if pipe.done(name)}
    return {"wall_s": time.perf_counter() - t0, "stage_seconds": stages}


def rollout_part(args: argparse.Namespace) -> list[dict[str, Any]]:
    """bench/rollout.py's rows: its full grid (its quick grid under --quick), two rounds a cell."""
    import rollout  # bench/rollout.py

    argv = ["--threads", str(args.threads), "--seed", str(args.seed), "--clock", "wall"]  # GPU time is wall
    argv += ["--quick"] if args.quick else ["--repeats", "2", "--groups", "2", "--steps", "2"]
    return rollout.run(rollout.parse_args(argv), say=lambda line: print(line, flush=True))


def markdown(result: dict[str, Any]) -> str:
    info = result["device"]
    lines = [
        f"# bench/gpu.py: {info['device']}, torch {info['torch']}, transformers {info['transformers']}, "
        f"trl {info['trl']}, {info['date']}" + (" (--quick: smoke test, not a measurement)"
                                                  if result["quick"] else ""),
        "",
        "Models are randomly initialised (untrained); "
        + ("tiny shapes." if result["quick"] else "shapes are Qwen2.5's with its vocabulary (151,936)."),
        "",
    ]
    if "peak" in result:
        p = result["peak"]
        lines += [f"Measured peak: {p['tflops']:.1f} TFLOP/s ({p['dtype']} matmul {p['size']}^3).", ""]
    if "update" in result:
        lines += ["| shape | prompt | n | path | checkpointing | s | MFU | peak GiB | status |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in result["update"]:
            s = f"{r['seconds']:.3f}" if r.get("seconds") else ""
            mfu = f"{r['mfu']:.0%}" if r.get("mfu") else ""
            mem = f"{r['peak_gib']:.1f}" if r.get("peak_gib") else ""
            lines.append(f"| {r['shape']} | {r['prompt']} | {r['n']} | {r['path']} | "
                         f"{'on' if r['checkpointing'] else 'off'} | {s} | {mfu} | {mem} | {r['status']} |")
        lines.append("")
    if "train" in result:
        t = result["train"]
        tps = t["generation_tokens_per_s"]
        lines += [f"tooltune train: {t['steps']} GRPO steps, {t['parameters'] / 1e6:.0f}M parameters, "
                  f"{t['wall_s']:.1f} s (rollout {t['rollout_s']:.1f} s, update {t['update_s']:.1f} s), "
                  f"generation {tps:.0f} tokens/s; packed update share {t['packed_update_share']}; "
                  f"checkpointing plan: {(t['update_plan'] or {}).get('reason')}", ""]
    if "quickstart" in result:
        q = result["quickstart"]
        lines += [f"Mini quickstart: {q['wall_s']:.1f} s end to end.", ""]
    if "rollout" in result:
        from rollout import HEADER, markdown_line  # bench/rollout.py

        lines += ["Rollouts (bench/rollout.py): today's generation vs the new path.", "", HEADER]
        lines += [markdown_line(r) for r in result["rollout"]] + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch  # deferred: torch takes seconds to import

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    result: dict[str, Any] = {"device": device_info(), "quick": args.quick, "args": vars(args)}
    print(json.dumps(result["device"]), flush=True)
    peak = measure_peak(args.quick)
    if "peak" in parts:
        result["peak"] = peak
    if "update" in parts:
        result["update"] = update_part(args, peak["tflops"])
    if "train" in parts:
        result["train"] = train_part(args, out)
    if "quickstart" in parts:
        result["quickstart"] = quickstart_part(args, out)
    if "rollout" in parts:
        result["rollout"] = rollout_part(args)
    (out / "gpu.json").write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    (out / "gpu.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    print(f"wrote {out / 'gpu.json'} and {out / 'gpu.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
