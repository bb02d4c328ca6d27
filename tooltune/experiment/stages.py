"""The training stages every profile runs: the SFT warm start, GRPO from it, and SFT continued from it for
GRPO's training time (the equal-compute baseline), with the lines announcing and summing them up.

  sft            `tooltune.training.sft.SFTLoop` on the training split's demonstrations; the warm start is
                 the first checked step whose greedy validation accuracy reaches `warm_start.threshold`
  grpo           `tooltune.training.runner.train` with the `train:` section's GRPO settings
  sft_continued  SFT continued from the warm start for the training time GRPO took (the fair baseline)

Inside a stage, SFT resumes from its last progress checkpoint (every `warm_start.eval_every` steps) and
GRPO from its last checkpoint (every `train.run.save_steps` steps).
"""

from __future__ import annotations

import json
import shutil
import time
from typing import Any

from tooltune.experiment.compute import SCREEN_KEYS, TRAIN_KEYS, BudgetWatch, grpo_curve
from tooltune.experiment.measure import backend, generation_budgets, greedy, load, run_device, target_lengths
from tooltune.experiment.run_folder import RunFolder
from tooltune.prompts import resolve_native
from tooltune.schema import Sample
from tooltune.training.config import TrainConfig
from tooltune.training.data import config_sft_rows
from tooltune.training.diagnostics import grpo_summary
from tooltune.training.runner import train
from tooltune.training.sft import SFTLoop, is_complete

DESCRIPTIONS = {
    "sft": "SFT warm start; the checkpoint is chosen by measured validation accuracy",
    "grpo": "GRPO from the warm start with the reward of train.reward",
    "eval_grpo": "evaluating after GRPO",
    "sft_continued": "baseline: SFT continued from the warm start for GRPO's training time (run's clock)",
    "eval_sft_continued": "evaluating the continued-SFT baseline",
}
"""The lines announcing the training stages and the evaluations after them."""


def headline(name: str, res: dict[str, Any]) -> str:
    """One line summing up a finished training stage ("" for another stage)."""
    if name == "sft":
        return f"warm start at step {res['chosen_step']} (validation greedy {res['chosen_val_accuracy']:.1%})"
    if name == "grpo":
        stopped = f"; stopped early: {res['stopped_early']}" if res.get("stopped_early") else ""
        return (f"{res['steps']} steps, training reward {res['reward_first']:.2f} -> "
                f"{res['reward_last']:.2f} (mean of the first / last {res.get('reward_window', '?')} steps)"
                f"{stopped}")
    if name == "sft_continued":
        return f"{res['steps']} more SFT steps in {res.get('train_s', res['train_wall_s']):.0f} s of " \
               f"{res.get('clock', 'wall')} time (GRPO's training time)"
    return ""


def sft_rows(tcfg: TrainConfig, tok: Any, p: RunFolder) -> list[dict[str, Any]]:
    """The SFT rows of the training split, in the template `tok`'s model answers in."""
    tcfg.data = tcfg.data.with_template(resolve_native(tok, tcfg.data.template, "train.data.template"))
    return config_sft_rows(tcfg, p.splits()["train"])


def stage_sft(p: RunFolder) -> dict[str, Any]:
    """The warm start: SFT checked every `eval_every` steps from `min_steps` on; the first check at or
    above the threshold stops it, the best check so far is kept in models/sft (loop state included,
    for the continued-SFT baseline). models/sft_progress holds the state to resume from."""
    w = p.cfg.warm_start
    tcfg = p.train_config("sft")
    progress = p.model_dir("sft_progress")
    resuming = is_complete(progress)
    device = run_device(p.cfg)
    model, tok = load(progress if resuming else p.model_dir("base"), device)
    rows = sft_rows(tcfg, tok, p)
    lengths = target_lengths(rows, tok, generation_budgets(p.cfg))
    for name, share in lengths["over"].items():
        if share > 0.1:
            p.say(f"    warning: {share:.0%} of the SFT targets are longer than {name} ({lengths['median']} "
                  f"tokens median, {lengths['p90']} p90): those answers are cut before their end")
    loop = SFTLoop.from_config(tcfg, model, tok, rows, device)
    state: dict[str, Any] = {"curve": [], "best_step": None, "best_accuracy": -1.0, "reached": False}
    if resuming:
        state = loop.restore(progress)
        p.say(f"    resuming SFT at step {loop.step} from {progress}")
    val = p.splits()["val"][: w.eval_samples]
    be = backend(p, model, tok)

    def check(lp: SFTLoop) -> bool:
        if lp.step >= w.min_steps or lp.step >= lp.total_steps:
            model.eval()
            acc = greedy(p, be, val)["accuracy"]
            state["curve"].append(
                {"step": lp.step, "loss": lp.loss, "val_accuracy": acc, "train_s": lp.train_seconds}
            )
            lp.postfix["val"] = f"{acc:.2f}"
            if acc > state["best_accuracy"]:
                lp.save(p.model_dir("sft"))
                state.update(best_step=lp.step, best_accuracy=acc)
            state["reached"] = acc >= w.threshold
        lp.save(progress, meta=state)
        return state["reached"]

    if not state["reached"]:
        loop.train(steps=loop.total_steps - loop.step, every=w.eval_every, callback=check, progress="SFT")
    shutil.rmtree(progress, ignore_errors=True)
    return {
        "chosen_step": state["best_step"],
        "chosen_val_accuracy": state["best_accuracy"],
        "curve": state["curve"],
        "train_s": loop.train_seconds,
        "reached_threshold": state["reached"],
        "rule": f"first val accuracy >= {w.threshold}",
        "target_tokens": lengths,
    }


def continued_sft_budget(p: RunFolder) -> tuple[float, float]:
    """(budget, the screen's share) of the continued-SFT baseline on the run's clock: GRPO's training time
    plus the screen of its prompts (real profile, `screen` stage), which is part of what GRPO cost."""
    clock = p.cfg.clock
    screen_s = p.result("screen")[SCREEN_KEYS[clock]] if p.done("screen") else 0.0
    return p.result("grpo")[TRAIN_KEYS[clock]] + screen_s, screen_s


def validation_samples(p: RunFolder) -> list[Sample]:
    """The validation samples GRPO's curve is measured on (`train.diagnostics.eval_samples`, at most
    `train.data.max_val_samples`), which the continued-SFT baseline is measured on too."""
    dg = p.cfg.train.diagnostics
    return p.splits()["val"][: min(dg.eval_samples, p.cfg.train.data.max_val_samples or dg.eval_samples)]


def stage_sft_continued(p: RunFolder) -> dict[str, Any]:
    """SFT continued from the warm start (its optimizer state too) for GRPO's training time on the
    run's clock (`clock`: CPU time by default), evaluated on the validation samples at the training
    times GRPO was, so that the two curves share their x values."""
    clock = p.cfg.clock
    grpo = p.result("grpo")
    budget, screen_s = continued_sft_budget(p)
    marks = [pt["t"] for pt in grpo_curve(grpo, clock)]
    tcfg = p.train_config("sft")
    device = run_device(p.cfg)
    model, tok = load(p.model_dir("sft"), device)
    loop = SFTLoop.from_config(tcfg, model, tok, sft_rows(tcfg, tok, p), device)
    loop.restore(p.model_dir("sft"))
    val = validation_samples(p)
    be = backend(p, model, tok)

    eval_cpu = [0.0]  # CPU time of the evaluations, left out of train_cpu_s whatever the clock

    def evaluate(lp: SFTLoop) -> float:
        c = time.process_time()
        model.eval()
        acc = greedy(p, be, val)["accuracy"]
        eval_cpu[0] += time.process_time() - c
        return acc

    watch = BudgetWatch(clock, budget, marks, evaluate)
    first = grpo["curve"][0] if grpo["curve"] else None  # the warm start, evaluated before GRPO's first step
    warm = [{"step": loop.step, "t": 0.0, "accuracy": first["accuracy"]}] if first and not first["step"] \
        else []
    start, trained, cpu, wall = loop.step, loop.train_seconds, time.process_time(), time.perf_counter()
    loop.train(budget=watch, every=1, callback=watch, progress="continued SFT")
    loop.save(p.model_dir("sft_continued"))
    return {
        "steps": loop.step - start,
        "clock": clock,
        "train_s": watch.spent,
        "train_wall_s": loop.train_seconds - trained,
        "train_cpu_s": time.process_time() - cpu - eval_cpu[0],
        "stage_wall_s": time.perf_counter() - wall,
        "budget_s": budget,
        "screen_s": screen_s,
        "loss": loop.loss,
        "curve": warm + watch.points,
    }


def stage_grpo(p: RunFolder) -> dict[str, Any]:
    """GRPO through `tooltune.training.runner.train`, resumed from its last checkpoint if one exists."""
    t = time.perf_counter()
    p.say(f"    reward components (weights): {p.cfg.train.reward.components}")
    run_dir = train(p.train_config("grpo"), resume=True)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return {**grpo_summary(run_dir / "metrics.jsonl"), "stage_wall_s": time.perf_counter() - t,
            "stopped_early": summary.get("grpo", {}).get("stopped_early")}
