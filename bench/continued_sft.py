"""SFT continued from a run's warm start in a second process beside its screen and GRPO stages.

The run's `sft_continued` stage (`tooltune.experiment.stages`) needs GRPO's cost before it starts, so it
runs after GRPO and a verdict takes the sum of both times. This trains the same rival at the same time as
the screen and GRPO, on another core: SFT from models/sft (its optimizer state too) on the run's
training split, until the run's `grpo` stage has finished and the budget the stage would use (the
screen's and GRPO's training time on the run's clock) is spent. Until the budget is known it saves the
weights every `--mark-every` seconds of training from `--first-mark` on; where the budget turns out
smaller than what it has already trained, the first mark at or past the budget is the rival (at most
one mark interval over: in the rival's favour). Saving is not training time.

It writes models/sft_continued and stages/sft_continued.json as the stage does (the stage is then
skipped), with its greedy validation on the samples of GRPO's curve, so
`bench/eval_checkpoint.py RUN sft_continued` scores it and `bench/grpo_verdict.py` compares it.

    python bench/run_stages.py runs/real42 screen grpo &   # the preset's screen and GRPO
    python bench/continued_sft.py runs/real42                # beside them, on the other core
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def grpo_budget(p: Any) -> tuple[float, float] | None:
    """(budget, the screen's share) once the run's GRPO stage has finished, else None: the
    `sft_continued` stage's own budget (`stages.continued_sft_budget`)."""
    from tooltune.experiment.stages import continued_sft_budget

    return continued_sft_budget(p) if p.done("grpo") else None


def pick(marks: list[dict[str, Any]], budget: float) -> dict[str, Any] | None:
    """The first mark at or past `budget` (by training time), or None where every mark is short of it."""
    past = [m for m in marks if m["t"] >= budget]
    return min(past, key=lambda m: m["t"]) if past else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a real-profile run folder (models/sft) whose GRPO runs")
    ap.add_argument("--first-mark", type=float, default=1500.0, help="training s of the first mark")
    ap.add_argument("--mark-every", type=float, default=120.0, help="training seconds between saved marks")
    ap.add_argument("--max-s", type=float, default=10000.0,
                    help="give up (exit 1) when this much was trained and GRPO has not finished")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="train for this many seconds of the run's clock instead of waiting for its GRPO "
                    "(the cost of a GRPO run with the same settings measured elsewhere)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    if args.mark_every <= 0 or args.first_mark < 0 or (args.budget_s is not None and args.budget_s <= 0):
        raise SystemExit("--mark-every and --budget-s must be positive and --first-mark not negative")

    import torch

    from tooltune.experiment.compute import BudgetWatch, now
    from tooltune.experiment.config import load_config
    from tooltune.experiment.measure import backend, greedy, load, run_device
    from tooltune.experiment.memory import PeakMemory
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.real import real_profile
    from tooltune.experiment.stages import sft_rows, validation_samples
    from tooltune.training.sft import SFTLoop

    torch.set_num_threads(args.threads)
    cfg = load_config(args.run / "config.yaml")
    p = Pipeline(args.run, cfg, say=lambda line: print(line, flush=True), profile=real_profile())
    if p.done("sft_continued"):
        print(f"{args.run}: sft_continued already finished")
        return
    if not (p.model_dir("sft") / "config.json").is_file():
        raise SystemExit(f"{args.run}: no warm start in {p.model_dir('sft')} (run its sft stage first)")
    clock, wall0, cpu0 = cfg.clock, time.perf_counter(), time.process_time()
    marks_dir = args.run / "sft_continued_marks"
    with PeakMemory() as memory:
        tcfg = p.train_config("sft")
        device = run_device(cfg)
        model, tok = load(p.model_dir("sft"), device)
        loop = SFTLoop.from_config(tcfg, model, tok, sft_rows(tcfg, tok, p), device)
        loop.restore(p.model_dir("sft"))
        start_step, trained = loop.step, loop.train_seconds
        watch = BudgetWatch(clock, math.inf if args.budget_s is None else args.budget_s)  # inf: not known yet
        marks: list[dict[str, Any]] = []
        state: dict[str, Any] = {"next": args.first_mark, "screen_s": None}

        def after_step(lp: SFTLoop) -> bool:
            spent = watch.spent
            if math.isinf(watch.budget):
                known = grpo_budget(p)
                if known is not None:
                    watch.budget, state["screen_s"] = known  # the loop stops itself once it is spent
                    print(f"budget {known[0]:.0f} s ({clock}) known at {spent:.0f} s trained", flush=True)
                elif spent >= args.max_s:
                    raise SystemExit(f"{args.run}: {spent:.0f} s trained and its grpo stage has not finished "
                                     f"(--max-s {args.max_s:.0f}); the marks are in {marks_dir}")
                elif spent >= state["next"]:
                    t = now(clock)
                    folder = marks_dir / f"{len(marks):03d}"
                    lp.model.save_pretrained(folder)
                    lp.tokenizer.save_pretrained(folder)
                    marks.append({"t": spent, "step": lp.step, "loss": lp.loss, "path": str(folder)})
                    watch.excluded += now(clock) - t
                    state["next"] = spent + args.mark_every
                    print(f"mark {len(marks)}: step {lp.step}, {spent:.0f} s trained, loss {lp.loss:.3f}",
                          flush=True)
                elif (lp.step - start_step) % 10 == 0:  # no bar: the budget is not known yet
                    print(f"step {lp.step}: {spent:.0f} s trained, loss {lp.loss:.3f}; GRPO still running",
                          flush=True)
            return spent >= watch.budget

        # a bar of the budget when it is given; lines every 10 steps and at each mark while it is not known
        loop.train(budget=watch, every=1, callback=after_step,
                   progress="continued SFT" if args.budget_s is not None else None)
        budget, spent = watch.budget, watch.spent
        chosen = pick(marks, budget)
        dest = p.model_dir("sft_continued")
        shutil.rmtree(dest, ignore_errors=True)
        if chosen is None:  # trained up to the budget (or past it by the step in which it became known)
            loop.save(dest)
            chosen = {"t": spent, "step": loop.step, "loss": loop.loss, "path": str(dest)}
        else:
            shutil.copytree(chosen["path"], dest)
        shutil.rmtree(marks_dir, ignore_errors=True)
        # the chosen checkpoint, read back, on the validation samples of GRPO's curve (the stage's last point)
        val = validation_samples(p)
        rival, _ = load(dest, device)
        rival.eval()
        accuracy = greedy(p, backend(p, rival, tok), val)["accuracy"]
    res = {
        "steps": chosen["step"] - start_step,
        "clock": clock,
        "train_s": chosen["t"],
        "train_wall_s": loop.train_seconds - trained,
        "budget_s": budget,
        "budget_from": "--budget-s" if args.budget_s is not None else "the run's screen and grpo stages",
        "screen_s": state["screen_s"],
        "over_budget_s": chosen["t"] - budget,
        "loss": chosen["loss"],
        "curve": [{"step": chosen["step"], "t": chosen["t"], "accuracy": accuracy, "n": len(val)}],
        "beside_grpo": {"marks_saved": len(marks), "mark_every_s": args.mark_every,
                        "trained_s": spent, "steps_trained": loop.step - start_step},
        "timing": {"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0,
                   "peak_rss_mb": memory.peak_mb},
    }
    p.stage_file("sft_continued").write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(f"sft_continued: {res['steps']} steps, {res['train_s']:.0f} s of {clock} time against a budget of "
          f"{budget:.0f} s ({res['budget_from']}), validation {accuracy:.1%} of {len(val)} -> {dest}")


if __name__ == "__main__":
    main()
