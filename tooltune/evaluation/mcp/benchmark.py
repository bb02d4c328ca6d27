"""MCP tasks as a registered `Benchmark`: a model's episode success on the tasks of MCP servers, measured
with the same runs, summary and report as the other benchmarks (``tooltune eval mcp``), before training.

Data: the task files of the folder ``--data-dir DIR`` (or ``$TOOLTUNE_DATA_DIR/mcp``), one category each
(`data`). Each task is one episode in the message view: the task's messages open the one turn, then up to
`STEP_LIMIT` model steps, each step's calls sent to the task's server by the `mcp` environment
(`tooltune.environments.mcp`: schema-checked, bounded, side by side across episodes) and the results sent
back as tool messages; a step without calls ends the episode. The verdict is the environment's outcome (the
task's checks on the state reached and the last step's text); a failed verdict says which check failed or
why the server could not be used. The servers run with the `mcp` environment's default settings.

Scores: accuracy per file and overall (every task counts once). The self-check (``--scripted``) plays,
for each task, the calls of its ``calls`` check (else its answer's calls) in the first step, then an
answer holding the strings of its ``answer`` check: tasks judged only by a ``result`` check on a state
those calls do not reach fail it. ACE does not apply (episodes, not single-turn entries).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tooltune.environments import Outcome, TaskError
from tooltune.environments.mcp import McpEnvironment
from tooltune.evaluation.benchmark import (
    Benchmark,
    EpisodeContext,
    Prepared,
    answer_policy,
    register_benchmark,
    split_categories,
)
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.mcp.data import McpEntry, load_entries, task_files
from tooltune.evaluation.verdict import Verdict, category_accuracy
from tooltune.generation import (
    Dialogue,
    EpisodeConfig,
    EpisodeRun,
    GenerationRequest,
    MessageContext,
    Reply,
    StopRules,
    drive,
    step_decoder,
)
from tooltune.prompts import grammar_for, render_answer
from tooltune.schema import Sample, ToolCall

STEP_LIMIT = 10
"""Model steps per task at most (a step without calls ends the episode before)."""


class _TaskTurn(Dialogue):
    """The task's own messages open the one turn; a step without calls ends the episode."""

    def __init__(self, sample: Sample) -> None:
        self.sample = sample

    def opening(self, run: EpisodeRun) -> Reply:
        return Reply.turn(self.sample.messages)


def _reason(outcome: Outcome) -> str | None:
    """Why an outcome failed, in one line (None when it succeeded)."""
    if outcome.success:
        return None
    details = outcome.details
    if details.get("server"):
        return f"server: {details['server']}"[:300]
    failed = [c for c in details.get("checks", []) if not c.get("passed")]
    parts = [f"{c['kind']}: " + ", ".join(f"{k}={v}" for k, v in c.items() if k not in ("kind", "passed"))
             for c in failed]
    return ("; ".join(parts) or "failed")[:300]


def run_tasks(entries: list[McpEntry], context: EpisodeContext) -> None:
    """Play every entry (module docstring), `sampling.batch_size` episodes at a time, and record its
    verdict with the raw text of every step."""
    controls, sampling, record = context.controls, context.sampling, context.record
    cfg = EpisodeConfig(controls.prompt_template, controls.mode, controls.history, controls.keep_reasoning,
                        controls.system_text(), sampling.temperature, sampling.max_new_tokens, context.seed)
    decode = step_decoder(grammar_for(cfg.template), cfg.mode)

    def runs() -> Any:
        for e in entries:
            env = McpEnvironment()
            try:
                env.reset(e.sample)
            except TaskError as err:
                record(Verdict(e.id, e.category, False, f"task: {err}"[:300]))
                continue
            run = EpisodeRun(env, MessageContext(cfg, e.id, "mcp"), _TaskTurn(e.sample),
                             StopRules(step_limit=STEP_LIMIT), decode, e.id)
            run.entry = e  # type: ignore[attr-defined]
            yield run

    def finished(run: EpisodeRun) -> None:
        env, e = run.executor, run.entry  # type: ignore[attr-defined]
        texts = run.record.texts
        try:
            outcome = env.outcome(texts[-1] if texts else None)
        finally:
            env.close()
        record(Verdict(e.id, e.category, outcome.success, _reason(outcome)), run.record.turn_texts)

    drive(runs(), context.backend, finished, parallel=sampling.batch_size)


def _calls_to_play(sample: Sample) -> list[ToolCall]:
    for check in _checks(sample):
        if check.get("kind") == "calls":
            return [ToolCall.from_dict(c) for c in check.get("calls") or []]
    return list(sample.answer)


def _checks(sample: Sample) -> list[dict[str, Any]]:
    raw = sample.meta["env"].get("check")
    return [c for c in (raw if isinstance(raw, list) else [raw]) if isinstance(c, dict)]


def scripted_policy(entries: Sequence[McpEntry], template: str) -> Callable[[GenerationRequest], str]:
    """The self-check's player (module docstring)."""
    plans = {}
    for e in entries:
        words = [t for c in _checks(e.sample) if c.get("kind") == "answer" for t in c.get("contains") or []]
        answer = render_answer([], template) + ("\n" + " ".join(words) if words else "")
        plans[e.id] = (render_answer(_calls_to_play(e.sample), template), answer)

    def play(r: GenerationRequest) -> str:
        calls, answer = plans[r.id]
        return calls if r.meta.get("step", 0) == 0 else answer

    return play


@register_benchmark
class McpBenchmark(Benchmark):
    name = "mcp"
    help = ("Episode success on MCP task files (tooltune data tasks mcp writes them), one category per "
            "file: measure a model on an MCP server's tasks before training on them.")
    formulas = {"overall": "tasks whose checks all held / tasks, over every task file"}

    def prepare(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Prepared[McpEntry]:
        assert data_dir is not None
        chosen = split_categories(categories)
        entries = load_entries(data_dir, chosen)
        files = [str(p) for p in task_files(data_dir, chosen)]
        return Prepared([], files, entries, run_tasks)

    def scores(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        cats = category_accuracy(records)
        total = sum(c["total"] for c in cats.values())
        overall = sum(c["correct"] for c in cats.values()) / total if total else None
        return {"categories": cats, "overall": overall}

    def answers(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Callable[[GenerationRequest], str]:
        assert data_dir is not None
        entries = load_entries(data_dir, split_categories(categories))
        return answer_policy({}, scripted_policy(entries, controls.prompt_template))
