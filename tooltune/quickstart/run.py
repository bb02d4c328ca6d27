"""The quickstart pipeline: data -> tiny model -> SFT warm start -> GRPO -> evaluations -> report.

Every stage writes `DIR/stages/<stage>.json` when it finishes; running again skips finished stages.
Inside a stage, SFT resumes from its last progress checkpoint (every `warm_start.eval_every` steps)
and GRPO from its last checkpoint (every `train.run.save_steps` steps); other stages are redone.

Stages (`STAGES`), each through the library:
  data           `tooltune.data.synthetic.quickstart_task`: train, val, heldout (>= 1,000), unseen_tools
  model          `tooltune.models.build_tiny_model`, tokenizer trained on the rendered training texts
  sft            `tooltune.training.sft.SFTLoop` on the (imperfect) demonstrations; the warm start is
                 the first checked step whose greedy validation accuracy reaches `warm_start.threshold`
  eval_sft       greedy held-out + unseen-tools exact match, pass@k on a held-out subset
                 (`tooltune.generation.score_samples`)
  grpo           `tooltune.training.runner.train` with the `train:` section's GRPO settings
  eval_grpo      the same evaluations after GRPO
  sft_continued  SFT continued from the warm start for the training time GRPO took (the fair baseline)
  eval_sft_continued

Run folder: config.yaml (the resolved settings; another config is refused), train.yaml (`tooltune
train --config DIR/train.yaml` runs the SFT and GRPO stages again), data/, models/{base,sft,
sft_continued}, grpo/ (the GRPO run: metrics.jsonl, checkpoints, final/), stages/, report.{json,md}, *.png;
branch.json in a run started from another run's warm start (`tooltune.quickstart.branch`).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tooltune import config as config_mechanism
from tooltune.data.synthetic.quickstart_task import FORMAT_TOKENS, build_splits, entity_tokens, sft_calls
from tooltune.models import CHAT_TEMPLATE, build_tiny_model
from tooltune.prompts import render_answer, render_prompt, resolve_native
from tooltune.quickstart.branch import branch_notes
from tooltune.quickstart.compute import TRAIN_KEYS, BudgetWatch, grpo_curve
from tooltune.quickstart.config import QuickstartConfig
from tooltune.quickstart.measure import (
    backend,
    generation_budgets,
    greedy,
    load,
    pass_at_k,
    run_device,
    target_lengths,
)
from tooltune.quickstart.memory import PeakMemory
from tooltune.quickstart.report import write_report
from tooltune.rundir import RunLock, check_identity, write_identity
from tooltune.schema import Sample, read_jsonl, write_jsonl
from tooltune.training.config import TrainConfig
from tooltune.training.data import config_sft_rows
from tooltune.training.diagnostics import grpo_summary
from tooltune.training.runner import train
from tooltune.training.sft import SFTLoop, is_complete

logger = logging.getLogger(__name__)

STAGES = ("data", "model", "sft", "eval_sft", "grpo", "eval_grpo", "sft_continued", "eval_sft_continued")

DESCRIPTIONS = {
    "data": "generating the synthetic tool-calling task (imperfect demonstrations, exact ground truth)",
    "model": "building a tiny Qwen2 model and training its tokenizer on the task's texts",
    "sft": "SFT warm start; the checkpoint is chosen by measured validation accuracy",
    "eval_sft": "evaluating the warm start: greedy held-out, unseen tools, pass@k",
    "grpo": "GRPO from the warm start with the reward of train.reward",
    "eval_grpo": "evaluating after GRPO",
    "sft_continued": "baseline: SFT continued from the warm start for GRPO's training time (run's clock)",
    "eval_sft_continued": "evaluating the continued-SFT baseline",
}

SPLITS = ("train", "val", "heldout", "unseen_tools")


def headline(name: str, res: dict[str, Any]) -> str:
    """One line summing up a finished stage."""
    if name == "data":
        return (
            ", ".join(f"{k} {v}" for k, v in res["sizes"].items())
            + f"; noisy demonstrations {res['noisy_share']:.1%}"
        )
    if name == "model":
        return f"{res['parameters']:,} parameters, vocabulary {res['vocab']}"
    if name == "sft":
        return f"warm start at step {res['chosen_step']} (validation greedy {res['chosen_val_accuracy']:.1%})"
    if name.startswith("eval_"):
        h = res["heldout"]
        extra = f", pass@{res['pass']['k']} {res['pass']['accuracy']:.1%}" if "pass" in res else ""
        return (
            f"held-out greedy {h['accuracy']:.1%} ± {h['se']:.1%}; unseen tools "
            f"{res['unseen_tools']['accuracy']:.1%}{extra}"
        )
    if name == "grpo":
        stopped = f"; stopped early: {res['stopped_early']}" if res.get("stopped_early") else ""
        return (f"{res['steps']} steps, training reward {res['reward_first']:.2f} -> "
                f"{res['reward_last']:.2f} (mean of the first / last {res.get('reward_window', '?')} steps)"
                f"{stopped}")
    if name == "sft_continued":
        return f"{res['steps']} more SFT steps in {res.get('train_s', res['train_wall_s']):.0f} s of " \
               f"{res.get('clock', 'wall')} time (GRPO's training time)"
    return ""


@dataclass(frozen=True)
class Profile:
    """What a quickstart profile runs: its stages in order, the function of each, the line announcing
    and the line summing up each, the data splits its stages read, and its report writer."""

    stages: tuple[str, ...]
    functions: Mapping[str, Callable[[Pipeline], dict[str, Any]]]
    descriptions: Mapping[str, str]
    headline: Callable[[str, dict[str, Any]], str]
    splits: tuple[str, ...]
    report: Callable[..., dict[str, Any]]
    """(out, config, results, notes=lines) -> the report, written into out."""


class Pipeline:
    """Runs the stages of `profile` (the synthetic quickstart by default) in `out`; `say` prints the story
    (the CLI passes print, tests a no-op)."""

    def __init__(self, out: str | Path, cfg: QuickstartConfig, say: Callable[[str], None] = print,
                 profile: Profile | None = None):
        self.out, self.cfg, self.say = Path(out), cfg, say
        self.profile = profile or synthetic_profile()
        # A folder is one run: the same settings resume it, other settings are refused naming each
        # difference (rundir.RunMismatch), and only one process writes it at a time (run() holds the lock).
        identity = cfg.identity()
        with RunLock(self.out):
            if not check_identity(self.out, identity, resume=True, defaults=cfg.default_identity()):
                write_identity(self.out, identity)
            (self.out / "stages").mkdir(parents=True, exist_ok=True)
            config_mechanism.dump(cfg, self.out / "config.yaml")
        self._splits: dict[str, list[Sample]] | None = None

    # ------------------------------------------------------------------ bookkeeping
    def stage_file(self, name: str) -> Path:
        return self.out / "stages" / f"{name}.json"

    def done(self, name: str) -> bool:
        return self.stage_file(name).is_file()

    def result(self, name: str) -> dict[str, Any]:
        return json.loads(self.stage_file(name).read_text())

    def _finish(self, name: str, result: dict[str, Any]) -> dict[str, Any]:
        tmp = self.stage_file(name).with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(self.stage_file(name))  # atomic: a stage is finished or not, never half-written
        return result

    def model_dir(self, name: str) -> Path:
        """Where a stage's model lives: models/<name>, the GRPO run's final/ for "grpo"; the `model` folder
        for "base" under the real profile."""
        if name == "base" and self.cfg.profile == "real":
            return Path(self.cfg.model)
        return self.out / "grpo" / "final" if name == "grpo" else self.out / "models" / name

    def splits(self) -> dict[str, list[Sample]]:
        if self._splits is None:
            self._splits = {k: read_jsonl(str(self.out / "data" / f"{k}.jsonl")) for k in self.profile.splits}
        return self._splits

    def train_config(self, stage: str) -> TrainConfig:
        """The `train:` section with the run folder's paths: stage "sft", "grpo" or "reproduce".

        "reproduce" is SFT then GRPO from the base model, SFT stopped at the chosen warm start with
        the same warm-up steps: what `tooltune train --config DIR/train.yaml` runs."""
        t = copy.deepcopy(self.cfg.train)
        t.name = t.name or "quickstart"
        t.run.seed = self.cfg.seed
        t.data.train = str(self.out / "data" / "train.jsonl")
        t.data.val = str(self.out / "data" / "val.jsonl")
        t.model.name_or_path = str(self.model_dir("base"))
        t.run.output_dir = str(self.out / "grpo")
        t.sft.enabled, t.grpo.enabled = stage in ("sft", "reproduce"), stage in ("grpo", "reproduce")
        if stage == "grpo":
            t.model.name_or_path = str(self.model_dir("sft"))
        if stage == "reproduce":
            chosen = self.result("sft")["chosen_step"]
            warmup = round(t.sft.max_steps * t.sft.warmup_ratio) if t.sft.max_steps > 0 else 0
            t.sft.max_steps = chosen
            t.sft.warmup_ratio = min(warmup, chosen - 1) / chosen if chosen > 1 else 0.0
            t.run.output_dir = str(self.out / "reproduce")
        return t

    # ------------------------------------------------------------------ run
    def run(self, stop_after: str | None = None) -> dict[str, Any]:
        with RunLock(self.out):
            return self._run(stop_after)

    def run_stage(self, name: str) -> dict[str, Any]:
        """Stage `name` (skipped when finished), seeded by its place in the profile and timed, so a stage run
        on its own (e.g. an evaluation in a second process beside the training) equals one run in order."""
        stages = self.profile.stages
        i = stages.index(name) + 1
        if self.done(name):
            self.say(f"[{i}/{len(stages)}] {name}: already finished, skipping (resume)")
            return self.result(name)
        self.say(f"[{i}/{len(stages)}] {name}: {self.profile.descriptions[name]}")
        torch.manual_seed(self.cfg.seed * 1000 + i)
        w, c = time.perf_counter(), time.process_time()
        with PeakMemory() as memory:
            res = self.profile.functions[name](self)
        res["timing"] = {
            "wall_s": time.perf_counter() - w,
            "cpu_s": time.process_time() - c,
            "loadavg_end": os.getloadavg()[0],
            "peak_rss_mb": memory.peak_mb,
        }
        self._finish(name, res)
        self.say(f"    {self.profile.headline(name, res)}  ({res['timing']['wall_s']:.0f} s)")
        return res

    def report(self) -> dict[str, Any]:
        """The profile's report from the stages finished so far."""
        results = {s: self.result(s) for s in self.profile.stages if self.done(s)}
        return self.profile.report(self.out, self.cfg.to_dict(), results, notes=branch_notes(self.out))

    def _run(self, stop_after: str | None) -> dict[str, Any]:
        torch.set_num_threads(self.cfg.threads)
        t0 = time.perf_counter()
        stages = self.profile.stages
        for name in stages:
            self.run_stage(name)
            if name == "sft":
                config_mechanism.dump(self.train_config("reproduce"), self.out / "train.yaml")
            if name == stop_after:
                break
        report = self.report()
        report["timings"]["this_invocation_s"] = time.perf_counter() - t0
        return report


# ---------------------------------------------------------------------------------------- data, model
def stage_data(p: Pipeline) -> dict[str, Any]:
    task = copy.deepcopy(p.cfg.task)
    task.seed = p.cfg.seed
    splits = build_splits(task)
    (p.out / "data").mkdir(exist_ok=True)
    for name, samples in splits.items():
        write_jsonl(samples, str(p.out / "data" / f"{name}.jsonl"))
    train_split = splits["train"]
    noisy = sum(1 for s in train_split if sft_calls(s) != list(s.answer))
    p._splits = None
    return {
        "sizes": {k: len(v) for k, v in splits.items()},
        "noisy_share": noisy / len(train_split),
        "categories": {k: _count(v) for k, v in splits.items()},
    }


def _count(samples: Sequence[Sample]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in samples:
        out[s.category] = out.get(s.category, 0) + 1
    return out


def stage_model(p: Pipeline) -> dict[str, Any]:
    # the tiny model is built with CHAT_TEMPLATE: its format is known before the model exists
    template = resolve_native(CHAT_TEMPLATE, p.cfg.train.data.template, "train.data.template")
    corpus = []
    for s in p.splits()["train"]:
        msgs = render_prompt(s, template)
        corpus.append(
            "\n".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>" for m in msgs)
            + f"\n<|im_start|>assistant\n{render_answer(s.answer, template)}<|im_end|>"
        )
    path = build_tiny_model(
        p.model_dir("base"),
        size=p.cfg.model_size,
        seed=p.cfg.seed,
        corpus=corpus,
        extra_special_tokens=FORMAT_TOKENS + entity_tokens(),
    )
    model, tok = load(path)
    return {"path": str(path), "parameters": sum(x.numel() for x in model.parameters()), "vocab": len(tok)}


# ---------------------------------------------------------------------------------------- evaluation
def _evaluate(p: Pipeline, model_name: str, with_pass: bool = False) -> dict[str, Any]:
    model, tok = load(p.model_dir(model_name), run_device(p.cfg))
    model.eval()
    be = backend(p, model, tok)
    sp = p.splits()
    res = {"heldout": greedy(p, be, sp["heldout"]), "unseen_tools": greedy(p, be, sp["unseen_tools"])}
    if with_pass:
        n = p.cfg.evaluation.pass_samples
        res["pass"] = pass_at_k(p, be, sp["heldout"][:n])
        same = res["heldout"]["hits"][:n]
        res["pass"]["greedy_same_samples"] = sum(same) / len(same)
    return res


def stage_eval_sft(p: Pipeline) -> dict[str, Any]:
    return _evaluate(p, "sft", with_pass=True)


def stage_eval_grpo(p: Pipeline) -> dict[str, Any]:
    return _evaluate(p, "grpo")


def stage_eval_sft_continued(p: Pipeline) -> dict[str, Any]:
    return _evaluate(p, "sft_continued")


# ---------------------------------------------------------------------------------------- SFT
def _sft_rows(tcfg: TrainConfig, tok: Any, p: Pipeline) -> list[dict[str, Any]]:
    """The SFT rows of the training split, in the template `tok`'s model answers in."""
    tcfg.data = tcfg.data.with_template(resolve_native(tok, tcfg.data.template, "train.data.template"))
    return config_sft_rows(tcfg, p.splits()["train"])


def stage_sft(p: Pipeline) -> dict[str, Any]:
    """The warm start: SFT checked every `eval_every` steps from `min_steps` on; the first check at or
    above the threshold stops it, the best check so far is kept in models/sft (loop state included,
    for the continued-SFT baseline). models/sft_progress holds the state to resume from."""
    w = p.cfg.warm_start
    tcfg = p.train_config("sft")
    progress = p.model_dir("sft_progress")
    resuming = is_complete(progress)
    device = run_device(p.cfg)
    model, tok = load(progress if resuming else p.model_dir("base"), device)
    rows = _sft_rows(tcfg, tok, p)
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


def stage_sft_continued(p: Pipeline) -> dict[str, Any]:
    """SFT continued from the warm start (its optimizer state too) for GRPO's training time on the
    run's clock (`clock`: CPU time by default), evaluated on the validation samples at the training
    times GRPO was, so that the two curves share their x values."""
    clock = p.cfg.clock
    grpo = p.result("grpo")
    budget = grpo[TRAIN_KEYS[clock]]
    marks = [pt["t"] for pt in grpo_curve(grpo, clock)]
    tcfg = p.train_config("sft")
    device = run_device(p.cfg)
    model, tok = load(p.model_dir("sft"), device)
    loop = SFTLoop.from_config(tcfg, model, tok, _sft_rows(tcfg, tok, p), device)
    loop.restore(p.model_dir("sft"))
    dg = p.cfg.train.diagnostics
    val = p.splits()["val"][: min(dg.eval_samples, p.cfg.train.data.max_val_samples or dg.eval_samples)]
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
        "loss": loop.loss,
        "curve": warm + watch.points,
    }


# ---------------------------------------------------------------------------------------- GRPO
def stage_grpo(p: Pipeline) -> dict[str, Any]:
    """GRPO through `tooltune.training.runner.train`, resumed from its last checkpoint if one exists."""
    t = time.perf_counter()
    p.say(f"    reward components (weights): {p.cfg.train.reward.components}")
    run_dir = train(p.train_config("grpo"), resume=True)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return {**grpo_summary(run_dir / "metrics.jsonl"), "stage_wall_s": time.perf_counter() - t,
            "stopped_early": summary.get("grpo", {}).get("stopped_early")}


STAGE_FUNCTIONS: dict[str, Callable[[Pipeline], dict[str, Any]]] = {
    "data": stage_data,
    "model": stage_model,
    "sft": stage_sft,
    "eval_sft": stage_eval_sft,
    "grpo": stage_grpo,
    "eval_grpo": stage_eval_grpo,
    "sft_continued": stage_sft_continued,
    "eval_sft_continued": stage_eval_sft_continued,
}



def synthetic_profile() -> Profile:
    """The synthetic quickstart: a tiny model built here on the synthetic task (`STAGES`)."""
    return Profile(STAGES, STAGE_FUNCTIONS, DESCRIPTIONS, headline, SPLITS, write_report)
