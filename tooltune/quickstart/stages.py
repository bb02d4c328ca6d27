"""The quickstart's stage functions (see `tooltune.quickstart.run`); each returns its JSON-able result."""

from __future__ import annotations

import json
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from tooltune.quickstart import evaluate as ev
from tooltune.quickstart.task import TEMPLATE, reasoning_for, sft_calls

if TYPE_CHECKING:
    from tooltune.quickstart.run import Pipeline

logger = logging.getLogger(__name__)

DESCRIPTIONS = {
    "data": "generating the synthetic tool-calling task (imperfect demonstrations, exact ground truth)",
    "model": "building a tiny Qwen2 model and training its tokenizer on the task's texts",
    "sft": "SFT warm start; the checkpoint is chosen by measured validation accuracy",
    "eval_sft": "evaluating the warm start: greedy held-out, unseen tools, pass@k",
    "grpo": "GRPO with the binary reward (format + exact calls)",
    "eval_grpo": "evaluating after GRPO",
    "sft_continued": "baseline: SFT continued from the warm start for the wall time GRPO took",
    "eval_sft_continued": "evaluating the continued-SFT baseline",
}


def headline(name: str, res: dict[str, Any]) -> str:
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
        return f"{res['steps']} steps, training reward {res['reward_first']:.2f} -> {res['reward_last']:.2f}"
    if name == "sft_continued":
        return f"{res['steps']} more SFT steps in {res['train_wall_s']:.0f} s"
    return ""


# ---------------------------------------------------------------------------------------- data, model
def stage_data(p: Pipeline) -> dict[str, Any]:
    from tooltune.quickstart.task import make_multi_step_splits, make_splits
    from tooltune.schema import write_jsonl

    splits = (make_multi_step_splits if p.cfg.multi_step else make_splits)(p.cfg.task())
    (p.out / "data").mkdir(exist_ok=True)
    for name, samples in splits.items():
        write_jsonl(samples, str(p.out / "data" / f"{name}.jsonl"))
    train = splits["train"]
    noisy = sum(1 for s in train if sft_calls(s) != list(s.answer))
    p._splits = None
    return {
        "sizes": {k: len(v) for k, v in splits.items()},
        "noisy_share": noisy / len(train),
        "categories": {k: _count(v) for k, v in splits.items()},
    }


def _count(samples: list) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in samples:
        out[s.category] = out.get(s.category, 0) + 1
    return out


def answer_text(calls: list) -> str:
    from tooltune.prompts.templates import render_answer

    return render_answer(calls, TEMPLATE, reasoning=reasoning_for(calls))


def stage_model(p: Pipeline) -> dict[str, Any]:
    from tooltune.models import build_tiny_model
    from tooltune.prompts.render import render_prompt
    from tooltune.quickstart.task import FORMAT_TOKENS, entity_tokens

    corpus = []
    for s in p.splits()["train"]:
        msgs = render_prompt(s, TEMPLATE)
        corpus.append(
            "\n".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>" for m in msgs)
            + f"\n<|im_start|>assistant\n{answer_text(s.answer)}<|im_end|>"
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


def load(path: Any) -> tuple[Any, Any]:
    from tooltune.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(str(path), dtype="float32")
    tok.padding_side = "left"
    return model, tok


def backend(p: Pipeline, model: Any, tok: Any) -> Any:
    from tooltune.generation import HFBackend

    return HFBackend(model=model, tokenizer=tok, batch_size=p.cfg.eval_batch, name="quickstart")


# ---------------------------------------------------------------------------------------- SFT
class SFTLoop:
    """Bare AdamW loop, loss on the completion only (twice as fast as a trainer at this size).

    The training engineer's `run_sft_torch` runs a fixed number of steps; the quickstart needs to stop at
    a measured warm start and to continue later from the same optimizer state for a wall-time budget.
    """

    def __init__(
        self,
        model: Any,
        tok: Any,
        samples: list,
        batch: int,
        lr: float,
        seed: int,
        warmup: int = 20,
        prompt_loss_weight: float = 0.0,
    ):
        import torch

        from tooltune.prompts.render import render_prompt

        self.model, self.tok, self.batch, self.lr, self.warmup = model, tok, batch, lr, warmup
        self.prompt_loss_weight = prompt_loss_weight
        self.rows = []
        for s in samples:
            prompt = tok.apply_chat_template(
                render_prompt(s, TEMPLATE), tokenize=False, add_generation_prompt=True
            )
            p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
            a_ids = tok(answer_text(sft_calls(s)) + tok.eos_token, add_special_tokens=False)["input_ids"]
            self.rows.append((p_ids + a_ids, [-100] * len(p_ids) + a_ids))  # (input ids, labels)
        self.rng = random.Random(seed)
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        self.step, self.loss = 0, float("nan")

    def train(self, steps: int | None = None, seconds: float | None = None) -> int:
        import torch

        from tooltune.training.sft import pad_batch

        done, t0 = 0, time.perf_counter()
        pad = self.tok.pad_token_id
        self.model.train()
        while (steps is None or done < steps) and (seconds is None or time.perf_counter() - t0 < seconds):
            rows = [self.rows[self.rng.randrange(len(self.rows))] for _ in range(self.batch)]
            ids, att, labels = pad_batch(rows, pad)
            for g in self.opt.param_groups:
                g["lr"] = self.lr * min(1.0, (self.step + 1) / self.warmup)
            loss = self._loss(ids, att, labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            self.step, done, self.loss = self.step + 1, done + 1, loss.item()
        return done

    def _loss(self, ids: Any, att: Any, labels: Any) -> Any:
        """Completion loss, plus `prompt_loss_weight` x the language-model loss on the prompt tokens.

        The prompt term costs no extra compute (the forward pass covers the prompt anyway) and gives the
        model in-context copying practice (the tool schemas repeat their parameter names under
        "required"), which is the skill whose late emergence dominates SFT time at this size.
        """
        import torch.nn.functional as F

        if not self.prompt_loss_weight:
            return self.model(input_ids=ids, attention_mask=att, labels=labels).loss
        logits = self.model(input_ids=ids, attention_mask=att).logits[:, :-1]
        target, comp = ids[:, 1:], labels[:, 1:] != -100
        prompt = att[:, 1:].bool() & ~comp
        ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), reduction="none")
        ce = ce.view_as(target)
        return ce[comp].mean() + self.prompt_loss_weight * ce[prompt].mean()

    def save(self, path: Any) -> None:
        import torch

        self.model.save_pretrained(path)
        self.tok.save_pretrained(path)
        torch.save(
            {"optimizer": self.opt.state_dict(), "step": self.step, "rng": self.rng.getstate()},
            f"{path}/sft_state.pt",
        )

    def restore(self, path: Any) -> None:
        import torch

        state = torch.load(f"{path}/sft_state.pt", weights_only=False)
        self.opt.load_state_dict(state["optimizer"])
        self.step = state["step"]
        self.rng.setstate(state["rng"])


def stage_sft(p: Pipeline) -> dict[str, Any]:
    import copy

    from tqdm import tqdm

    c = p.cfg
    model, tok = load(p.model_dir("base"))
    loop = SFTLoop(model, tok, p.splits()["train"], c.sft_batch, c.sft_lr, c.seed)
    val = p.splits()["val"][: c.sft_eval_samples]
    be = backend(p, model, tok)
    curve, best, train_s = [], None, 0.0
    bar = tqdm(total=c.sft_max_steps, desc="SFT", unit="step")
    while loop.step < c.sft_max_steps:
        t = time.perf_counter()
        n = loop.train(steps=min(c.sft_eval_every, c.sft_max_steps - loop.step))
        train_s += time.perf_counter() - t
        bar.update(n)
        if loop.step < c.sft_min_steps and loop.step < c.sft_max_steps:
            continue
        acc = ev.evaluate(be, val, TEMPLATE, c.max_new_tokens)["accuracy"]
        curve.append({"step": loop.step, "loss": loop.loss, "val_accuracy": acc, "train_s": train_s})
        bar.set_postfix(loss=f"{loop.loss:.3f}", val=f"{acc:.2f}")
        if best is None or acc > best[1]:
            best = (loop.step, acc, copy.deepcopy(model.state_dict()), copy.deepcopy(loop.opt.state_dict()))
        if acc >= c.warm_threshold:
            break
    bar.close()
    step, acc, weights, opt_state = (
        best if best is not None else (loop.step, float("nan"), model.state_dict(), loop.opt.state_dict())
    )
    model.load_state_dict(weights)
    loop.opt.load_state_dict(opt_state)
    loop.step = step
    loop.save(p.model_dir("sft"))
    return {
        "chosen_step": step,
        "chosen_val_accuracy": acc,
        "curve": curve,
        "train_s": train_s,
        "reached_threshold": acc >= c.warm_threshold,
        "rule": f"first val accuracy >= {c.warm_threshold}",
    }


# ---------------------------------------------------------------------------------------- evaluation
def _evaluate(p: Pipeline, model_name: str, with_pass: bool = False) -> dict[str, Any]:
    c = p.cfg
    model, tok = load(p.model_dir(model_name))
    be = backend(p, model, tok)
    sp = p.splits()
    res = {
        "heldout": ev.evaluate(be, sp["heldout"], TEMPLATE, c.max_new_tokens),
        "unseen_tools": ev.evaluate(be, sp["unseen_tools"], TEMPLATE, c.max_new_tokens),
    }
    if with_pass:
        res["pass"] = ev.pass_at_k(
            be, sp["heldout"][: c.pass_samples], TEMPLATE, c.pass_k, 1.0, c.max_new_tokens, seed=c.seed
        )
        greedy = res["heldout"]["hits"][: c.pass_samples]
        res["pass"]["greedy_same_samples"] = sum(greedy) / len(greedy)
    return res


def stage_eval_sft(p: Pipeline) -> dict[str, Any]:
    return _evaluate(p, "sft", with_pass=True)


def stage_eval_grpo(p: Pipeline) -> dict[str, Any]:
    return _evaluate(p, "grpo")


def stage_eval_sft_continued(p: Pipeline) -> dict[str, Any]:
    return _evaluate(p, "sft_continued")


# ---------------------------------------------------------------------------------------- GRPO
def stage_grpo(p: Pipeline) -> dict[str, Any]:
    from tooltune.quickstart.grpo import run_grpo

    return run_grpo(p)


def stage_sft_continued(p: Pipeline) -> dict[str, Any]:
    c = p.cfg
    budget = p.result("grpo")["train_wall_s"]
    model, tok = load(p.model_dir("sft"))
    loop = SFTLoop(model, tok, p.splits()["train"], c.sft_batch, c.sft_lr, c.seed + 1)
    loop.restore(p.model_dir("sft"))
    start = loop.step
    t, cpu = time.perf_counter(), time.process_time()
    loop.train(seconds=budget)
    wall = time.perf_counter() - t
    loop.save(p.model_dir("sft_continued"))
    return {
        "steps": loop.step - start,
        "train_wall_s": wall,
        "train_cpu_s": time.process_time() - cpu,
        "budget_s": budget,
        "loss": loop.loss,
    }


def to_json(x: Any) -> str:
    return json.dumps(x)
