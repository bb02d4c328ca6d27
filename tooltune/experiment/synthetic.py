"""The synthetic profile (`profile: synthetic`, the default): the quickstart demo, a tiny model built here
learning tool calling on the synthetic task, offline on a CPU.

Stages (`STAGES`), each through the library:
  data           `tooltune.data.synthetic.quickstart_task`: train, val, heldout (>= 1,000), unseen_tools
  model          `tooltune.models.build_tiny_model`, tokenizer trained on the rendered training texts
  sft            the SFT warm start on the (imperfect) demonstrations (`tooltune.experiment.stages`)
  eval_sft       greedy held-out + unseen-tools exact match, pass@k on a held-out subset
                 (`tooltune.experiment.measure`)
  grpo           GRPO from the warm start
  eval_grpo      the same evaluations after GRPO
  sft_continued  SFT continued from the warm start for the training time GRPO took (the fair baseline)
  eval_sft_continued

The report is `tooltune.experiment.report`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from tooltune.data.synthetic.quickstart_task import FORMAT_TOKENS, build_splits, entity_tokens, sft_calls
from tooltune.experiment import stages
from tooltune.experiment.measure import backend, greedy, load, pass_at_k, run_device
from tooltune.experiment.report import write_report
from tooltune.experiment.run_folder import Profile, RunFolder
from tooltune.models import CHAT_TEMPLATE, build_tiny_model
from tooltune.prompts import render_answer, render_prompt, resolve_native
from tooltune.schema import Sample, write_jsonl

STAGES = ("data", "model", "sft", "eval_sft", "grpo", "eval_grpo", "sft_continued", "eval_sft_continued")

DESCRIPTIONS = {
    "data": "generating the synthetic tool-calling task (imperfect demonstrations, exact ground truth)",
    "model": "building a tiny Qwen2 model and training its tokenizer on the task's texts",
    **stages.DESCRIPTIONS,
    "eval_sft": "evaluating the warm start: greedy held-out, unseen tools, pass@k",
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
    if name.startswith("eval_"):
        h = res["heldout"]
        extra = f", pass@{res['pass']['k']} {res['pass']['accuracy']:.1%}" if "pass" in res else ""
        return (
            f"held-out greedy {h['accuracy']:.1%} ± {h['se']:.1%}; unseen tools "
            f"{res['unseen_tools']['accuracy']:.1%}{extra}"
        )
    return stages.headline(name, res)


def stage_data(p: RunFolder) -> dict[str, Any]:
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


def stage_model(p: RunFolder) -> dict[str, Any]:
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


def _evaluate(p: RunFolder, model_name: str, with_pass: bool = False) -> dict[str, Any]:
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


def stage_eval_sft(p: RunFolder) -> dict[str, Any]:
    return _evaluate(p, "sft", with_pass=True)


def stage_eval_grpo(p: RunFolder) -> dict[str, Any]:
    return _evaluate(p, "grpo")


def stage_eval_sft_continued(p: RunFolder) -> dict[str, Any]:
    return _evaluate(p, "sft_continued")


STAGE_FUNCTIONS: dict[str, Callable[[RunFolder], dict[str, Any]]] = {
    "data": stage_data,
    "model": stage_model,
    "sft": stages.stage_sft,
    "eval_sft": stage_eval_sft,
    "grpo": stages.stage_grpo,
    "eval_grpo": stage_eval_grpo,
    "sft_continued": stages.stage_sft_continued,
    "eval_sft_continued": stage_eval_sft_continued,
}


def synthetic_profile() -> Profile:
    """The synthetic profile: a tiny model built here on the synthetic task (`STAGES`)."""
    return Profile(STAGES, STAGE_FUNCTIONS, DESCRIPTIONS, headline, SPLITS, write_report)
