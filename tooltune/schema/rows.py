"""The rows tooltune hands to training engines: column names, their encoding, and the check of a row set.

A TRL row (what `GRPOTrainer` / `SFTTrainer` take, and what reward functions receive as columns) is
written by `tooltune.data.export.to_trl_rows` and read by the trainers, the rewards and the TRL
environment classes, all through the names below:

    prompt         list of chat messages (SFT rows: the prompt part)
    answer         JSON string of [{"name", "arguments"}] (the ground truth; [] = no call)
    sample_id      str;  category  str;  tools  JSON string of tool dicts;  meta  JSON string
    chat_tools     JSON string of the chat template's tools, only under a template whose tools go to the
                   chat template (``native``); `row_tools` reads it
    prompt_index   int, the position of the row's prompt (GRPO rows: the filter's key)
    completion     list of assistant messages (SFT rows: the target)
    task           JSON text of an environment task (a `Sample` whose ``meta["env"]`` names its
                   environment): the rows of the TRL environment classes (`tooltune.integrations.trl`)
    environment    the name of a row's environment (TRL's dict of environment factories reads it)

Two more columns come from the rollout, not the data: ``episode_outcome`` and ``episode_format``,
which agentic rollouts hand to the episode rewards.

JSON strings keep the Arrow schema fixed whatever shapes tools and meta take across rows.

`check_rows(rows, needs, source)` refuses a row set without what its reader needs, naming the source
(a file or a dataset), the row, its sample id and the column; `missing_columns` is the same check on
the column names of a dataset too large to read row by row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tooltune.schema.records import SchemaError, loads_record
from tooltune.schema.types import Sample, ToolCall, ToolSpec

PROMPT = "prompt"
ANSWER = "answer"
SAMPLE_ID = "sample_id"
CATEGORY = "category"
TOOLS = "tools"
META = "meta"
CHAT_TOOLS = "chat_tools"
PROMPT_INDEX = "prompt_index"
COMPLETION = "completion"
TASK = "task"
ENVIRONMENT = "environment"
EPISODE_OUTCOME = "episode_outcome"
EPISODE_FORMAT = "episode_format"

TRL_COLUMNS = (PROMPT, ANSWER, SAMPLE_ID, CATEGORY, TOOLS, META)
"""The columns every TRL row has (``chat_tools`` is added only under a chat-tools template)."""
ROLLOUT_COLUMNS = (EPISODE_OUTCOME, EPISODE_FORMAT)
"""Columns an agentic rollout adds to each rollout's reward inputs."""


# ----------------------------------------------------------------------------------------- encoding
def calls_column(calls: Iterable[ToolCall]) -> str:
    """The ``answer`` column: the calls as a JSON string."""
    return json.dumps([c.to_dict() for c in calls], ensure_ascii=False)


def tools_column(tools: Iterable[ToolSpec]) -> str:
    """The ``tools`` column: the tool specs as a JSON string."""
    return json.dumps([t.to_dict() for t in tools], ensure_ascii=False)


def meta_column(meta: Mapping[str, Any]) -> str:
    """The ``meta`` column: the sample's meta as a JSON string (values JSON cannot hold as text)."""
    return json.dumps(meta, ensure_ascii=False, default=str)


def load_json_column(value: Any) -> Any:
    """Columns ``tools`` and ``meta`` arrive as JSON strings in TRL rows and as objects elsewhere;
    a column that is not a readable record (bad JSON, too deep, a huge integer) reads as None."""
    if isinstance(value, str):
        try:
            return loads_record(value, "column") if value.strip() else None
        except SchemaError:
            return None
    return value


def row_tools(row: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The chat-template tools of a training row (its ``chat_tools``, JSON or a list), None without."""
    tools = row.get(CHAT_TOOLS)
    if isinstance(tools, str):
        tools = json.loads(tools)
    return list(tools) if tools else None


def load_task(value: Any) -> Sample:
    """A row's ``task``: JSON text of a `Sample` or the object itself; SchemaError names the column."""
    where = f"row column {TASK!r}"
    if isinstance(value, Sample):
        return value
    if isinstance(value, str):
        return Sample.from_json(value, where)
    if isinstance(value, dict):
        return Sample.from_dict(value, where)
    raise SchemaError(f"{where}: expected the task's JSON text, got {type(value).__name__}")


# ----------------------------------------------------------------------------------------- checking
def _prompt_problem(value: Any) -> str | None:
    return None if value else "missing prompt"


def _answer_problem(value: Any) -> str | None:
    if value is None or value == "":
        return "missing ground truth"
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError as e:
        return f"ground truth is not valid JSON ({e.msg})"
    if not isinstance(parsed, list):
        return f"ground truth must be a list of calls, got {type(parsed).__name__}"
    return None


def _task_problem(value: Any) -> str | None:
    try:
        load_task(value)
    except SchemaError as e:
        return f"not a task ({e})"
    return None


def _index_problem(value: Any) -> str | None:
    return None if isinstance(value, int) and not isinstance(value, bool) else (
        f"expected an integer, got {type(value).__name__}")


VALUE_CHECKS: dict[str, Callable[[Any], str | None]] = {
    PROMPT: _prompt_problem,
    ANSWER: _answer_problem,
    TASK: _task_problem,
    PROMPT_INDEX: _index_problem,
}
"""What a column's value must be, per column that has a rule (None: fine, else the problem)."""


def missing_columns(columns: Iterable[str], needs: Iterable[str], source: str, reader: str = "",
                    hint: str = "") -> None:
    """Refuse when `columns` (a dataset's or a row's column names) lack any of `needs`: one SchemaError
    naming `source`, the missing columns, their `reader`, the columns there are and a `hint`."""
    have = set(columns)
    missing = [c for c in needs if c not in have]
    if missing:
        names = ", ".join(repr(c) for c in missing)
        raise SchemaError(
            f"{source}: no {names} column{'s' if len(missing) > 1 else ''}"
            f"{f', which {reader} reads' if reader else ''} (it has: {', '.join(sorted(have)) or 'none'})"
            f"{f'; {hint}' if hint else ''}"
        )


def check_rows(rows: Sequence[Mapping[str, Any]], needs: Sequence[str], source: str = "rows",
               reader: str = "") -> None:
    """Refuse the first row that lacks a column of `needs` or whose value breaks the column's rule
    (`VALUE_CHECKS`), naming `source` (a file or dataset), the row, its sample id and the column."""
    for i, row in enumerate(rows):
        name = f"{source}: record {i} (sample_id {row.get(SAMPLE_ID, '?')!r})"
        for column in needs:
            if column not in row:
                missing_columns(row, [column], name, reader)
            check = VALUE_CHECKS.get(column)
            problem = check(row.get(column)) if check is not None else None
            if problem is not None:
                raise SchemaError(f"{name}.{column}: {problem}")
