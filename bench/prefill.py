"""Prefill of a rollout call as one padded batch against one prompt at a time, side by side.

Each cell runs `tooltune.generation.rollout.sample` on the same prompts with `prefill="batch"` and with
`prefill="each"`, each in a fresh process (so that one's retained memory does not count in the other's
peak), alternating, best CPU time of `--repeats` kept, and prints the ratios. Prompts are random token
ids of the given lengths (attention's cost does not depend on which tokens); every completion runs to
`--new-tokens` (no stop token), so both arms decode the same number of steps. The greedy tokens of the
two arms are compared: on the CPU they agree unless two logits tie within float error.

    python bench/prefill.py --model models/smollm2-135m-instruct --threads 1 \\
        --out bench/results/prefill_cpu_DATE.json

Cases (default): a GRPO step of the real recipe (4 prompts of 1,930 / 900 / 600 / 450 tokens, 8 sampled
completions each, temperature 0.7) and an evaluation batch (8 prompts of 400 to 1,900 tokens, greedy).
With `--source RUN` (a real-profile quickstart run whose SFT stage finished) the case `screen` runs the
run's screen (`screen.enabled`: its k answers at GRPO's temperature, its batch size and seeds, the binary
reward) over the first `--screen-prompts` training prompts with its warm start, and compares the rewards:

    python bench/prefill.py --source runs/real42 --cases screen --screen-prompts 24 --threads 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

CASES = {
    "grpo_step": {"lens": [1930, 900, 600, 450], "n": 8, "temperature": 0.7},
    "eval_batch": {"lens": [1900, 1500, 1200, 1000, 800, 650, 500, 400], "n": 1, "temperature": 0.0},
}


def run_arm(args: argparse.Namespace) -> dict[str, Any]:
    """One arm in this process: load, sample once, report CPU / wall seconds, peak memory and tokens."""
    import torch
    from transformers import AutoModelForCausalLM

    from tooltune.experiment.memory import PeakMemory
    from tooltune.generation.rollout import Sampling, sample

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    case = {**CASES[args.case], **({"lens": args.lens} if args.lens else {})}
    g = torch.Generator().manual_seed(args.seed)
    vocab = model.config.vocab_size
    prompts = [torch.randint(100, vocab - 1, (n,), generator=g).tolist() for n in case["lens"]]
    sampling = Sampling(args.new_tokens, temperature=case["temperature"], seed=args.seed)
    wall, cpu = time.perf_counter(), time.process_time()
    with PeakMemory() as memory:
        out = sample(model, prompts, case["n"], sampling, pad_id=0, stop_ids=set(), prefill=args.arm)
    return {"cpu_s": round(time.process_time() - cpu, 2), "wall_s": round(time.perf_counter() - wall, 2),
            "peak_mb": memory.peak_mb, "ids": out.ids}


def run_screen(args: argparse.Namespace) -> dict[str, Any]:
    """The run's screen over its first training prompts, with the warm start, in this process."""
    import dataclasses

    import torch

    from tooltune.data.recipes import policy_rewards
    from tooltune.experiment.config import load_config
    from tooltune.experiment.measure import load
    from tooltune.experiment.memory import PeakMemory
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.real import real_profile
    from tooltune.experiment.screen import screen_config
    from tooltune.generation import HFBackend

    torch.set_num_threads(args.threads)
    p = Pipeline(args.source, load_config(f"{args.source}/config.yaml"), say=lambda _: None,
                 profile=real_profile())
    train = p.splits()["train"][: args.screen_prompts]
    cfg = dataclasses.replace(screen_config(p), cache=None, progress=False)  # nothing written to the run
    model, tok = load(p.model_dir("sft"))
    backend = HFBackend(model=model, tokenizer=tok, batch_size=cfg.batch_size, prefill=args.arm)
    wall, cpu = time.perf_counter(), time.process_time()
    with PeakMemory() as memory:
        rewards = policy_rewards(train, backend, cfg, prompt=p.cfg.train.data, label="screen")
    return {"cpu_s": round(time.process_time() - cpu, 2), "wall_s": round(time.perf_counter() - wall, 2),
            "peak_mb": memory.peak_mb, "ids": [rewards[s.id] for s in train]}


def spawn(args: argparse.Namespace, case: str, arm: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--arm", arm, "--case", case, "--model", args.model,
           "--threads", str(args.threads), "--new-tokens", str(args.new_tokens), "--seed", str(args.seed)]
    if args.lens:
        cmd += ["--lens", ",".join(map(str, args.lens))]
    if args.source:
        cmd += ["--source", args.source, "--screen-prompts", str(args.screen_prompts)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{case}/{arm} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/smollm2-135m-instruct", help="a model folder")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}")
    ap.add_argument("--new-tokens", type=int, default=64, help="new tokens per completion")
    ap.add_argument("--lens", type=lambda s: [int(x) for x in s.split(",")], default=None,
                    help="comma-separated prompt lengths for every case instead of its own")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--repeats", type=int, default=1, help="rounds per arm; the lowest CPU time is kept")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    ap.add_argument("--source", default=None, help="a real-profile run folder with its SFT stage done "
                    "(case screen)")
    ap.add_argument("--screen-prompts", type=int, default=24, help="training prompts the screen case answers")
    ap.add_argument("--arm", choices=("batch", "each"), help=argparse.SUPPRESS)
    ap.add_argument("--case", choices=(*CASES, "screen"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.arm:
        print(json.dumps(run_screen(args) if args.case == "screen" else run_arm(args)))
        return
    rows = []
    for case in args.cases.split(","):
        if case not in CASES and not (case == "screen" and args.source):
            raise SystemExit(f"--cases: unknown case {case!r} (known: {', '.join(CASES)}, "
                             "and screen with --source)")
        best: dict[str, dict[str, Any]] = {}
        for _ in range(args.repeats):
            for arm in ("batch", "each"):
                r = spawn(args, case, arm)
                if arm not in best or r["cpu_s"] < best[arm]["cpu_s"]:
                    best[arm] = r
        b, e = best["batch"], best["each"]
        same = sum(x == y for x, y in zip(b["ids"], e["ids"], strict=True))
        setting = {"source": args.source, "prompts": args.screen_prompts} if case == "screen" else \
            {**CASES[case], **({"lens": args.lens} if args.lens else {}), "new_tokens": args.new_tokens}
        row = {"case": case, **setting,
               "threads": args.threads, "batch": {k: b[k] for k in ("cpu_s", "wall_s", "peak_mb")},
               "each": {k: e[k] for k in ("cpu_s", "wall_s", "peak_mb")},
               "cpu_ratio": round(b["cpu_s"] / e["cpu_s"], 2),
               "peak_saved_mb": None if b["peak_mb"] is None or e["peak_mb"] is None
               else round(b["peak_mb"] - e["peak_mb"]),
               "rows_equal": f"{same} of {len(b['ids'])}"}
        rows.append(row)
        print(f"{case:10s} batch cpu {b['cpu_s']:7.1f} s peak {b['peak_mb']} MB | each cpu "
              f"{e['cpu_s']:7.1f} s peak {e['peak_mb']} MB | batch/each CPU {row['cpu_ratio']}x, "
              f"rows equal {row['rows_equal']}", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"measured": time.strftime("%Y-%m-%d"), "model": args.model, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
