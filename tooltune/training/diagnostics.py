"""Per-step diagnostics: training clock, metrics JSONL, held-out accuracy, token regions.

`TrainingClock` measures training time with held-out evaluations left out; `MetricsLogger` writes
every Trainer log record with it (and enforces a training-time budget); `HeldOutEval` adds the
held-out accuracy curve; `grpo_summary` reads back what a GRPO run measured.

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm
from transformers import TrainerCallback

from tooltune.generation import HFBackend, Sampling, score_prompts
from tooltune.prompts import PromptTemplate, grammar_for
from tooltune.schema import calls_from_any
from tooltune.schema.rows import row_tools
from tooltune.training.progress import budget_bar, show_progress
from tooltune.training.report import EPISODE_SUCCESS_KEY, VALIDATION_PART_KEYS, reward_ends

logger = logging.getLogger(__name__)

HELDOUT_KEY = "tooltune/heldout_exact_match"
"""Metrics key of the greedy exact match on the validation rows (`data.val`; `HeldOutEval`)."""
HELDOUT_SUCCESS_KEY = EPISODE_SUCCESS_KEY
"""Metrics key of the greedy episode success rate on the validation tasks (agentic training)."""
HELDOUT_SAMPLES_KEY = "tooltune/heldout_samples"
"""Metrics key of the number of validation rows behind each `HELDOUT_KEY` point (its standard error)."""
HELDOUT_PART_KEYS = VALIDATION_PART_KEYS
"""Metrics keys of `HELDOUT_KEY` on the rows that expect a call ("call") and on those that expect none."""


class RegionTagger:
    """Maps completion token ids to region codes (0 other, 1 reasoning, 2 tool call) by decoding."""

    def __init__(self, tokenizer: Any, template: str | PromptTemplate) -> None:
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


class TrainingClock:
    """Training time: wall (and CPU) time since `start`, minus the spans run under `excluded()`.

    Held-out evaluations run under `excluded()`, so the time a budget counts and a curve's x-axis are
    the time spent training (rollouts, updates, logging, checkpoints), whatever the evaluation costs.
    `offset` carries the training time of an earlier run that this one resumes.
    """

    def __init__(self, offset: float = 0.0, cpu_offset: float = 0.0) -> None:
        self.offset, self.cpu_offset = offset, cpu_offset
        self.start()

    def start(self) -> None:
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.skipped = self.cpu_skipped = 0.0

    @contextmanager
    def excluded(self) -> Iterator[None]:
        t, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.skipped += time.perf_counter() - t
            self.cpu_skipped += time.process_time() - c

    @property
    def seconds(self) -> float:
        return self.offset + time.perf_counter() - self.t0 - self.skipped

    @property
    def cpu_seconds(self) -> float:
        return self.cpu_offset + time.process_time() - self.c0 - self.cpu_skipped

    def seconds_on(self, clock: str) -> float:
        """Training seconds on `clock`: ``cpu`` (`cpu_seconds`) or ``wall`` (`seconds`)."""
        return self.cpu_seconds if clock == "cpu" else self.seconds


class MetricsLogger(TrainerCallback):
    """Appends every Trainer log record as one JSON line to the metrics file.

    A record is {"stage", "step", "epoch", "time", "train_s", "train_cpu_s", <numeric log values>}:
    "time" is the wall time since this process started training, "train_s" / "train_cpu_s" the
    training time of `clock` (held-out evaluations excluded; continued across a resume when the clock
    is given the earlier run's time). `max_seconds` > 0 stops training once the training time on
    `budget_clock` reaches it: "wall" (`clock.seconds`) or "cpu" (`clock.cpu_seconds`).
    """

    def __init__(
        self, path: str | Path, stage: str, max_seconds: float = 0.0, clock: TrainingClock | None = None,
        budget_clock: str = "wall",
    ) -> None:
        self.path = Path(path)
        self.stage = stage
        self.max_seconds = max_seconds
        self.budget_clock = budget_clock
        self.clock = clock or TrainingClock()
        self.t0 = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.t0 = time.perf_counter()
        self.clock.start()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.max_seconds and self.clock.seconds_on(self.budget_clock) >= self.max_seconds:
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
            "train_s": round(self.clock.seconds, 3),
            "train_cpu_s": round(self.clock.cpu_seconds, 3),
        }
        for k, v in logs.items():
            if isinstance(v, (int, float)) and not (isinstance(v, float) and not math.isfinite(v)):
                record[k] = v
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


class StepProgress(TrainerCallback):
    """One progress bar per training run, the last reward and held-out accuracy beside it.

    Replaces the Trainer's own bar, which prints every log record (every step at logging_steps 1);
    the records themselves are in the metrics file. A run under a time budget (`budget_s` > 0 seconds
    of `clock` on `budget_clock`, the clock `MetricsLogger` stops it by) gets a bar of the budget's
    seconds with the step count beside it (`tooltune.training.progress`); another, a bar of steps."""

    def __init__(
        self, desc: str = "train", budget_s: float = 0.0, clock: TrainingClock | None = None,
        budget_clock: str = "wall",
    ) -> None:
        self.desc, self.budget_s, self.bar, self.postfix = desc, budget_s, None, {}
        self.clock, self.budget_clock = clock or TrainingClock(), budget_clock

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not state.is_world_process_zero:
            return
        if self.budget_s:
            self.bar = budget_bar(self.desc, self.budget_s, self.budget_clock, self._spent())
        else:
            total = state.max_steps or None
            self.bar = tqdm(total=total, initial=state.global_step, desc=self.desc, unit="step")

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.bar is None:
            return
        if self.budget_s:
            self.postfix["steps"] = str(state.global_step)  # kept when a log record redraws the postfix
            show_progress(self.bar, self._spent(), state.global_step, self.postfix)
        else:
            self.bar.update(state.global_step - self.bar.n)

    def _spent(self) -> float:
        return self.clock.seconds_on(self.budget_clock)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if self.bar is None or not logs:
            return
        for key, name in (("reward", "reward"), ("loss", "loss"), (HELDOUT_KEY, "val"),
                          (HELDOUT_SUCCESS_KEY, "val")):
            if isinstance(logs.get(key), (int, float)):
                self.postfix[name] = f"{logs[key]:.3f}"
        self.bar.set_postfix(self.postfix, refresh=False)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


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


def greedy_rewards(
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    template: str | PromptTemplate,
    max_new_tokens: int = 256,
    batch_size: int = 16,
) -> list[float]:
    """Held-out exact match of each row: its greedy completion (through `HFBackend`, with the row's
    chat-template tools) scored like the binary reward."""
    if not rows:
        return []
    backend = HFBackend(model=model, tokenizer=tokenizer, batch_size=batch_size, name="held-out")
    was_training = model.training
    model.eval()
    try:
        rewards = score_prompts(
            backend, [r["prompt"] for r in rows], [r["answer"] for r in rows], template,
            sampling=Sampling(temperature=0.0, max_new_tokens=max_new_tokens, batch_size=0),
            tools=[row_tools(r) for r in rows],
        )
    finally:
        model.train(was_training)
    return [r[0] for r in rewards]


def exact_match_parts(rows: list[dict[str, Any]], rewards: list[float]) -> dict[str, float]:
    """The mean of `rewards` over the rows whose answer holds a call ("call") and over those whose
    answer is no call ("no_call"); {} unless both kinds are among `rows`."""
    parts: dict[str, list[float]] = {"call": [], "no_call": []}
    for i, (row, reward) in enumerate(zip(rows, rewards, strict=True)):
        expects_call = bool(calls_from_any(row["answer"], f"validation row {i}: answer"))
        parts["call" if expects_call else "no_call"].append(reward)
    if not all(parts.values()):
        return {}
    return {part: sum(v) / len(v) for part, v in parts.items()}


class HeldOutEval(TrainerCallback):
    """Greedy exact match on validation rows (or, with a `scorer`, what it measures: the episode
    success of agentic training) at step 0 (with `every`), every `every` optimizer steps and at the
    end of training.

    The evaluation runs under `clock.excluded()` (it is not training time). Each point goes to the
    trainer's log as `key` (`HELDOUT_KEY`, or `HELDOUT_SUCCESS_KEY` with a scorer), so the metrics file
    holds the curve (`heldout_curve`); exact match also goes to the log on the rows that expect a call
    and on those that expect none (`HELDOUT_PART_KEYS`) when both kinds are there. `history` keeps
    this process's points as {"step", "train_s", "accuracy"} (and "call", "no_call").
    """

    def __init__(
        self,
        trainer: Any,
        rows: list[dict[str, Any]],
        template: str | PromptTemplate,
        every: int = 0,
        max_new_tokens: int = 256,
        batch_size: int = 16,
        clock: TrainingClock | None = None,
        scorer: Any = None,
    ) -> None:
        """`scorer(model, tokenizer, rows) -> float` replaces greedy exact match (agentic training
        scores episode success)."""
        self.trainer, self.rows, self.template = trainer, rows, template
        self.scorer = scorer
        self.key = HELDOUT_KEY if scorer is None else HELDOUT_SUCCESS_KEY
        self.name = "exact match" if scorer is None else "episode success"
        self.every, self.max_new_tokens, self.batch_size = every, max_new_tokens, batch_size
        self.clock = clock or TrainingClock()
        self.history: list[dict[str, Any]] = []

    def _run(self, state: Any, at_end: bool = False) -> None:
        if not self.rows or not state.is_world_process_zero:
            return
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        with self.clock.excluded():
            parts: dict[str, float] = {}
            if self.scorer is not None:
                acc = self.scorer(model, self.trainer.processing_class, self.rows)
            else:
                rewards = greedy_rewards(
                    model,
                    self.trainer.processing_class,
                    self.rows,
                    self.template,
                    self.max_new_tokens,
                    self.batch_size,
                )
                acc = sum(rewards) / len(rewards)
                parts = exact_match_parts(self.rows, rewards)
        self.history.append(
            {"step": state.global_step, "train_s": self.clock.seconds, "accuracy": acc} | parts
        )
        logs = {self.key: acc, HELDOUT_SAMPLES_KEY: len(self.rows)}
        logs |= {HELDOUT_PART_KEYS[part]: value for part, value in parts.items()}
        if at_end:  # outside a logging step (start or end of training): write a record of its own
            self.trainer.log(logs)
        else:  # joins the record the trainer logs for this step
            for key, value in logs.items():
                self.trainer._metrics["train"][key].append(value)
        logger.info("step %d: held-out %s %.4f on %d samples%s", state.global_step, self.name, acc,
                    len(self.rows), "".join(f", {p} {v:.4f}" for p, v in parts.items()))

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.every and state.global_step == 0:  # the starting point of the curve
            self._run(state, at_end=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.every and state.global_step % self.every == 0:
            self._run(state)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not self.history or self.history[-1]["step"] != state.global_step:
            self._run(state, at_end=True)


# ------------------------------------------------------------------------------------ reading the file


def read_metrics(path: str | Path, stage: str | None = None) -> list[dict[str, Any]]:
    """The records of the metrics file (of one `stage` when given); torn lines are skipped."""
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if stage is None or rec.get("stage") == stage:
            out.append(rec)
    return out


def heldout_curve(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validation accuracy (exact match, or episode success) against training time: [{"step",
    "train_s", "accuracy"}, plus "n" (the rows evaluated), "call" and "no_call" (`HELDOUT_PART_KEYS`)
    when logged] from log records.

    With `run.logging_steps` 1 every point carries its own step; with more, a point made between two
    logging steps is reported at the next one. A step evaluated twice (a run resumed at its last
    step evaluates it again) keeps its last point."""
    points = {
        r["step"]: {"step": r["step"], "train_s": r.get("train_s", 0.0), "accuracy": r[key]}
        | ({"n": round(r[HELDOUT_SAMPLES_KEY])} if HELDOUT_SAMPLES_KEY in r else {})
        | {part: r[k] for part, k in HELDOUT_PART_KEYS.items() if k in r}
        for r in records
        for key in (HELDOUT_KEY, HELDOUT_SUCCESS_KEY)
        if key in r
    }
    return sorted(points.values(), key=lambda p: p["step"])


STEP_TOTALS = {
    "rollout_s": "tooltune/rollout_time",
    "update_s": "tooltune/update_time",
    "rollouts_generated": "tooltune/rollouts_generated",
    "tokens_trained": "tooltune/tokens_trained",
    "rollouts_dropped": "tooltune/rollouts_dropped",
}
"""Summary key -> per-step log key summed over the steps by `grpo_summary`."""


def grpo_summary(path: str | Path, stage: str = "grpo") -> dict[str, Any]:
    """What a GRPO run measured, from its metrics file.

    steps; train_wall_s / train_cpu_s (training time, held-out evaluations excluded); the sums of
    `STEP_TOTALS`; reward_first / reward_last / reward_window (`training.report.reward_ends`); log
    (the per-step records); curve (`heldout_curve`)."""
    records = read_metrics(path, stage)
    steps = [r for r in records if "reward" in r]
    rewards = [r["reward"] for r in steps]
    out: dict[str, Any] = {
        "steps": max((r["step"] for r in records), default=0),
        "train_wall_s": max((r.get("train_s", 0.0) for r in records), default=0.0),
        "train_cpu_s": max((r.get("train_cpu_s", 0.0) for r in records), default=0.0),
    }
    for name, key in STEP_TOTALS.items():
        out[name] = sum(r.get(key, 0.0) for r in steps)
    out["reward_first"], out["reward_last"], out["reward_window"] = reward_ends(rewards)
    out["log"] = steps
    out["curve"] = heldout_curve(records)
    return out
