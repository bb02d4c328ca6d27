"""Per-step diagnostics: metrics JSONL, held-out exact match, reasoning vs tool-call token regions.

The efficiency paper (arXiv 2606.00135, Fig. 8) tracks token entropy separately for reasoning tokens
and tool-call tokens; `RegionTagger` labels each completion token 1 (inside the reasoning block),
2 (inside the call block) or 0 (tags, whitespace, anything else) so the trainer can split its entropy.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from tooltune.generation import HFBackend, Sampling, score_prompts
from tooltune.prompts import grammar_for

logger = logging.getLogger(__name__)


class RegionTagger:
    """Maps completion token ids to region codes (0 other, 1 reasoning, 2 tool call) by decoding."""

    def __init__(self, tokenizer: Any, template: str) -> None:
        self.tokenizer = tokenizer
        grammar = grammar_for(template)
        self.tags = (grammar.reasoning, grammar.call) if grammar.reasoning and grammar.call else None
        if self.tags is None:  # bare python / json grammars: the whole completion is the call
            self.patterns = None
        else:
            self.patterns = [
                re.compile(re.escape(o) + r"(.*?)(?:" + re.escape(c) + r"|$)", re.S) for o, c in self.tags
            ]

    def codes(self, ids: list[int]) -> list[int]:
        pieces = self.tokenizer.batch_decode([[t] for t in ids], skip_special_tokens=False)
        if self.patterns is None:
            return [2 if p.strip() else 0 for p in pieces]
        text = "".join(pieces)
        char_code = [0] * (len(text) + 1)
        for code, pat in ((1, self.patterns[0]), (2, self.patterns[1])):
            for m in pat.finditer(text):
                for k in range(m.start(1), m.end(1)):
                    char_code[k] = code
        out, pos = [], 0
        for p in pieces:
            # a token belongs to the region of its first non-space character
            off = next((i for i, ch in enumerate(p) if not ch.isspace()), None)
            out.append(char_code[pos + off] if off is not None else 0)
            pos += len(p)
        return out

    def __call__(self, completion_ids: Any, completion_mask: Any) -> Any:
        import torch  # deferred: this module is imported by the CLI's argument parsing

        rows = []
        for ids, mask in zip(completion_ids.tolist(), completion_mask.tolist(), strict=True):
            n = int(sum(mask))
            codes = self.codes(ids[:n]) if n else []
            rows.append(codes + [0] * (len(ids) - len(codes)))
        return torch.tensor(rows, dtype=torch.int8, device=completion_ids.device)


class MetricsLogger(TrainerCallback):
    """Appends every Trainer log record as one JSON line {"stage", "step", "time", ...} to the metrics file.

    "time" is the stage's wall time in seconds since this process started training (it restarts at 0
    after a resume); `max_seconds` > 0 stops training once that much time has passed.
    """

    def __init__(self, path: str | Path, stage: str, max_seconds: float = 0.0) -> None:
        self.path = Path(path)
        self.stage = stage
        self.max_seconds = max_seconds
        self.t0 = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.t0 = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.max_seconds and time.perf_counter() - self.t0 >= self.max_seconds:
            control.should_training_stop = True

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if not state.is_world_process_zero or not logs:
            return
        record = {
            "stage": self.stage,
            "step": state.global_step,
            "epoch": state.epoch,
            "time": round(time.perf_counter() - self.t0, 3),
        }
        for k, v in logs.items():
            if isinstance(v, (int, float)) and not (isinstance(v, float) and not math.isfinite(v)):
                record[k] = v
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def truncate_metrics(path: str | Path, stage: str, last_step: int) -> int:
    """On resume: drop records of `stage` after `last_step` so no step appears twice; returns kept count."""
    p = Path(path)
    if not p.is_file():
        return 0
    kept = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a kill mid-write
        if rec.get("stage") != stage or rec.get("step", 0) <= last_step:
            kept.append(line)
    tmp = p.with_suffix(".tmp")
    tmp.write_text("".join(x + "\n" for x in kept), encoding="utf-8")
    tmp.replace(p)
    return len(kept)


def greedy_exact_match(
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    template: str,
    max_new_tokens: int = 256,
    batch_size: int = 16,
) -> float:
    """Held-out exact match: greedy completions (through `HFBackend`) scored like the binary reward."""
    if not rows:
        return float("nan")
    backend = HFBackend(model=model, tokenizer=tokenizer, batch_size=batch_size, name="held-out")
    was_training = model.training
    model.eval()
    try:
        rewards = score_prompts(
            backend, [r["prompt"] for r in rows], [r["answer"] for r in rows], template,
            sampling=Sampling(temperature=0.0, max_new_tokens=max_new_tokens, batch_size=0),
        )
    finally:
        model.train(was_training)
    return sum(r[0] for r in rewards) / len(rows)


class HeldOutEval(TrainerCallback):
    """Greedy exact match on validation rows every `every` optimizer steps and at the end of training."""

    def __init__(
        self,
        trainer: Any,
        rows: list[dict[str, Any]],
        template: str,
        every: int = 0,
        max_new_tokens: int = 256,
        batch_size: int = 16,
    ) -> None:
        self.trainer, self.rows, self.template = trainer, rows, template
        self.every, self.max_new_tokens, self.batch_size = every, max_new_tokens, batch_size
        self.history: list[tuple[int, float]] = []

    def _run(self, state: Any, at_end: bool = False) -> None:
        if not self.rows or not state.is_world_process_zero:
            return
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        acc = greedy_exact_match(
            model,
            self.trainer.processing_class,
            self.rows,
            self.template,
            self.max_new_tokens,
            self.batch_size,
        )
        self.history.append((state.global_step, acc))
        if at_end:  # outside a logging step (start or end of training): write a record of its own
            self.trainer.log({"tooltune/heldout_exact_match": acc})
        else:
            self.trainer._metrics["train"]["tooltune/heldout_exact_match"].append(acc)
        logger.info(
            "step %d: held-out exact match %.4f on %d samples", state.global_step, acc, len(self.rows)
        )

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.every and state.global_step == 0:  # the starting point of the curve
            self._run(state, at_end=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.every and state.global_step % self.every == 0:
            self._run(state)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not self.history or self.history[-1][0] != state.global_step:
            self._run(state, at_end=True)
