"""MCP tasks as a registered `Benchmark`: a model's episode success on the tasks of MCP servers, measured
with the same runs, summary and report as the other benchmarks (``tooltune eval mcp``), before training.

Data: the folder ``--data-dir DIR`` (or ``$TOOLTUNE_DATA_DIR/mcp``) holds task files, ``NAME.jsonl``, as
``tooltune data tasks mcp`` writes them (canonical samples whose ``meta["env"]`` is an ``mcp`` task,
checked against the live server); each file is one category, named by its stem. Each task is one
episode in the message view: the task's messages open the one turn, then up to `STEP_LIMIT` model steps,
each step's calls sent to the task's server by the `mcp` environment (`tooltune.environments.mcp`:
schema-checked, bounded, side by side across episodes) and the results sent back as tool messages; a
step without calls ends the episode. The verdict is the environment's outcome (the task's checks on the
state reached and the last step's text); a failed verdict says which check failed or why the server
could not be used. The servers run with the `mcp` environment's default settings.

Scores: accuracy per file and overall (every task counts once). The self-check (``--scripted``) plays,
for each task, the calls of its ``calls`` check (else its answer's calls) in the first step, then an
answer holding the strings of its ``answer`` check: tasks judged only by a ``result`` check on a state
those calls do not reach fail it. ACE does not apply (episodes, not single-turn entries).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune.environments import Outcome, TaskError
from tooltune.environments.mcp import ENVIRONMENT, McpEnvironment
from tooltune.evaluation.benchmark import (
    AceGold,
    Benchmark,
    Prepared,
    Record,
    answer_policy,
    register_benchmark,
    split_categories,
)
from tooltune.evaluation.protocol import Controls
from tooltune.evaluation.verdict import Verdict, category_accuracy
from tooltune.generation import (
    Backend,
    Dialogue,
    EpisodeConfig,
    EpisodeRun,
    GenerationRequest,
    MessageContext,
    Reply,
    Sampling,
    StopRules,
    drive,
    step_decoder,
)
from tooltune.prompts import grammar_for, render_answer
from tooltune.schema import Sample, SchemaError, ToolCall, read_jsonl

STEP_LIMIT = 10
"""Model steps per task at most (a step without calls ends the episode before)."""


@dataclass
class McpEntry:
    """One task of one task file (its stem is the category)."""

    id: str
    category: str
    sample: Sample


def task_files(data_dir: Path, categories: Sequence[str] | None = None) -> list[Path]:
    """The task files of `categories` (None: every ``*.jsonl`` in `data_dir`); ValueError naming a
    category without its file."""
    if categories is None:
        files = sorted(data_dir.glob("*.jsonl"))
        if not files:
            raise ValueError(f"mcp: no task files (*.jsonl, as `tooltune data tasks mcp` writes them) "
                             f"in {data_dir}")
        return files
    missing = [c for c in categories if not (data_dir / f"{c}.jsonl").is_file()]
    if missing:
        known = sorted(p.stem for p in data_dir.glob("*.jsonl"))
        raise ValueError(f"mcp: no task file for {missing} in {data_dir} (task files: {known})")
    return [data_dir / f"{c}.jsonl" for c in categories]


def load_entries(data_dir: Path, categories: Sequence[str] | None = None) -> list[McpEntry]:
    """Every task of the task files, checked to be an ``mcp`` task; SchemaError naming the file and
    task that is not."""
    entries = []
    for path in task_files(data_dir, categories):
        for sample in read_jsonl(str(path)):
            env = sample.meta.get("env")
            if not isinstance(env, dict) or env.get("name") != ENVIRONMENT:
                raise SchemaError(f"{path}: task {sample.id!r} is not an mcp task (meta.env.name must be "
                                  f"{ENVIRONMENT!r}); write task files with `tooltune data tasks mcp`")
            entries.append(McpEntry(sample.id, path.stem, sample))
    return entries


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


def run_tasks(entries: list[McpEntry], backend: Backend, controls: Controls, sampling: Sampling, seed: int,
              record: Record, user_backend: Backend | None = None) -> None:
    """Play every entry (module docstring), `sampling.batch_size` episodes at a time, and record its
    verdict with the raw text of every step."""
    cfg = EpisodeConfig(controls.prompt_template, controls.mode, controls.history, controls.keep_reasoning,
                        controls.system_text(), sampling.temperature, sampling.max_new_tokens, seed)
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

    drive(runs(), backend, finished, parallel=sampling.batch_size)


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

    def prepare(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None,
                user_simulator: bool = False) -> Prepared:
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

    def ace_gold(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                 ) -> AceGold:
        assert data_dir is not None
        cats = [p.stem for p in task_files(data_dir, split_categories(categories))]
        return AceGold(cats, [], {}, {c: "MCP tasks are episodes, not single-turn entries" for c in cats})
