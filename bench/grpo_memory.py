"""Where a GRPO step's memory goes: the peak resident memory of each phase of a few real GRPO steps.

Runs one arm of a sweep file (`bench/grpo_sweep.py`'s arms: a branch of a quickstart run with its own
GRPO settings) for a few steps, with every phase of the trainer inside its own
`tooltune.experiment.memory.PeakMemory` block (the kernel's high-water mark, reset at the phase's start,
so each figure is that phase's exact peak):

- rollout: generation and scoring of a step's completions (TRL's `_generate_and_score_completions`),
  and inside it the generation alone (`_generate_single_turn`, tooltune's group-prefill sampler);
- update: the forward and backward passes of the step's micro-batches (`training_step` less its rollout),
  and inside it each forward pass that computes per-token log-probs (`_get_per_token_logps_and_entropies`:
  the vocabulary logits of the completion tokens);
- optimizer: AdamW's step;
- validation: the held-out greedy pass (`train.diagnostics`).

Each call also records the resident memory it started from, so a phase's own share (peak − start) is
apart from what earlier phases left behind. With `--trim`, glibc's `malloc_trim(0)` runs at the start of
every phase: the freed blocks the allocator keeps are handed back first, so a start figure that stays
high is memory something still holds, and one that drops was the allocator's. A thread also samples
resident memory every `--interval` seconds for the timeline plot. Writes OUT/memory.json (each phase's
calls: start, seconds, start and peak MB) and OUT/memory.png (resident memory against time, phases
shaded), and prints a table of each phase's largest peak and largest rise over its start.

    python bench/grpo_memory.py --source runs/real42 --out runs/grpo_mem \
        --arms configs/sweeps/real_smollm2.yaml --arm lr_1e-5 --steps 2
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import functools
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from grpo_sweep import read_arms, run_arm  # noqa: E402 (after the path insert)

from tooltune.experiment.memory import PeakMemory, status_kb  # noqa: E402

PHASES = ("rollout", "generation", "update", "log-probs", "optimizer", "validation")


class PhaseRecorder:
    """Each call of a wrapped method as (phase, start s, seconds, peak MB), and resident memory sampled every
    `interval` seconds for the timeline. A nested phase is recorded on its own and also counts in the call
    around it (the update's `training_step` holds the rollout; `phase_table` tells such updates apart)."""

    def __init__(self, interval: float, trim: bool = False) -> None:
        self.trim = _malloc_trim() if trim else None
        self.t0 = time.perf_counter()
        self.calls: list[dict[str, Any]] = []
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(interval,), daemon=True)

    def _sample(self, interval: float) -> None:
        while not self._stop.wait(interval):
            kb = status_kb("VmRSS")
            if kb is not None:
                self.samples.append((time.perf_counter() - self.t0, kb / 1024))

    def wrap(self, owner: Any, name: str, phase: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)
        recorder = self

        @functools.wraps(original)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            if recorder.trim is not None:
                recorder.trim(0)
            start = time.perf_counter()
            with PeakMemory() as mem:
                result = original(*args, **kwargs)
            recorder.calls.append({"phase": phase, "start_s": round(start - recorder.t0, 2),
                                   "seconds": round(time.perf_counter() - start, 2),
                                   "start_mb": mem.start_mb, "peak_mb": mem.peak_mb})
            return result

        setattr(owner, name, recorded)

    def __enter__(self) -> PhaseRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _malloc_trim() -> Callable[[int], int]:
    """glibc's `malloc_trim`; SystemExit where the C library has none (it is glibc's alone)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if not hasattr(libc, "malloc_trim"):
        raise SystemExit("--trim: this C library has no malloc_trim (glibc only)")
    return libc.malloc_trim


def instrument(recorder: PhaseRecorder) -> None:
    """Wrap the trainer's phases (class attributes, so the trainer the pipeline builds is covered)."""
    import torch

    from tooltune.training.diagnostics import HeldOutEval
    from tooltune.training.grpo import ToolTuneGRPOTrainer

    recorder.wrap(ToolTuneGRPOTrainer, "_generate_and_score_completions", "rollout")
    recorder.wrap(ToolTuneGRPOTrainer, "_generate_single_turn", "generation")
    recorder.wrap(ToolTuneGRPOTrainer, "_get_per_token_logps_and_entropies", "log-probs")
    recorder.wrap(ToolTuneGRPOTrainer, "training_step", "update")
    recorder.wrap(torch.optim.AdamW, "step", "optimizer")
    recorder.wrap(HeldOutEval, "_run", "validation")


def phase_table(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per phase: calls, total seconds, the largest peak (MB). An update's peak includes its rollout's
    when a step's first micro-batch generated; `update_only_peak_mb` is over the updates that did not."""
    rollout_windows = [(c["start_s"], c["start_s"] + c["seconds"]) for c in calls if c["phase"] == "rollout"]

    def holds_rollout(c: dict[str, Any]) -> bool:
        return any(c["start_s"] <= a and b <= c["start_s"] + c["seconds"] for a, b in rollout_windows)

    rows = []
    for phase in PHASES:
        mine = [c for c in calls if c["phase"] == phase and c["peak_mb"] is not None]
        if not mine:
            continue
        row = {"phase": phase, "calls": len(mine), "seconds": round(sum(c["seconds"] for c in mine), 1),
               "peak_mb": max(c["peak_mb"] for c in mine)}
        rises = [c["peak_mb"] - c["start_mb"] for c in mine if c.get("start_mb") is not None]
        row["rise_mb"] = round(max(rises), 1) if rises else None
        if phase == "update":
            alone = [c["peak_mb"] for c in mine if not holds_rollout(c)]
            row["update_only_peak_mb"] = max(alone) if alone else None
        rows.append(row)
    return rows


def plot(recorder: PhaseRecorder, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"rollout": "tab:orange", "update": "tab:blue", "optimizer": "tab:red",
              "validation": "tab:green"}  # generation and log-probs lie inside a rollout or an update
    fig, ax = plt.subplots(figsize=(11, 4))
    # rollouts are drawn over the update that holds them
    for phase in ("update", "rollout", "optimizer", "validation"):
        for i, c in enumerate(c for c in recorder.calls if c["phase"] == phase):
            ax.axvspan(c["start_s"], c["start_s"] + c["seconds"], color=colors[phase], alpha=0.25,
                       label=phase if i == 0 else None)
    if recorder.samples:
        t, mb = zip(*recorder.samples)
        ax.plot(t, [m / 1024 for m in mb], color="black", lw=1, label="resident memory")
    ax.set_xlabel("seconds")
    ax.set_ylabel("resident memory (GB)")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, required=True, help="the quickstart run folder to branch from")
    ap.add_argument("--out", type=Path, required=True, help="folder for the arm's run and the results")
    ap.add_argument("--arms", type=Path, required=True, help="sweep file (bench/grpo_sweep.py's format)")
    ap.add_argument("--arm", required=True, help="the arm of the sweep file to run")
    ap.add_argument("--steps", type=int, default=2, help="GRPO steps")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between resident-memory samples")
    ap.add_argument("--trim", action="store_true",
                    help="call glibc's malloc_trim(0) at the start of every phase (see the docstring)")
    args = ap.parse_args()
    _, arms = read_arms(args.arms)
    if args.arm not in arms:
        ap.error(f"--arm {args.arm!r} is not in {args.arms} (arms: {', '.join(arms)})")
    args.out.mkdir(parents=True, exist_ok=True)
    with PhaseRecorder(args.interval, trim=args.trim) as recorder:
        instrument(recorder)
        res = run_arm(args.source, args.out / args.arm, args.steps, arms[args.arm], args.threads)
    rows = phase_table(recorder.calls)
    stage_peak = (res.get("timing") or {}).get("peak_rss_mb")
    result = {"date": time.strftime("%Y-%m-%d"), "arm": args.arm, "settings": arms[args.arm],
              "steps": args.steps, "threads": args.threads, "trim": args.trim, "stage_peak_mb": stage_peak,
              "phases": rows, "calls": recorder.calls}
    (args.out / "memory.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    plot(recorder, args.out / "memory.png", f"GRPO memory by phase: {args.arm}, {args.steps} steps "
         f"({result['date']})")
    print("| phase | calls | seconds | peak (GB) | largest rise over its start (GB) |\n|---|---|---|---|---|")
    for r in rows:
        extra = (f" (updates without a rollout: {r['update_only_peak_mb'] / 1024:.2f})"
                 if r.get("update_only_peak_mb") else "")
        rise = "–" if r.get("rise_mb") is None else f"{r['rise_mb'] / 1024:.2f}"
        print(f"| {r['phase']} | {r['calls']} | {r['seconds']:.0f} | {r['peak_mb'] / 1024:.2f}{extra} "
              f"| {rise} |")
    print(f"stage peak: {stage_peak} MB; {args.out / 'memory.json'}, {args.out / 'memory.png'}")


if __name__ == "__main__":
    main()
