"""Exports of canonical samples: JSONL, TRL rows / a Hugging Face `datasets.Dataset`, verl parquet.

TRL rows (what `GRPOTrainer` / `SFTTrainer` take, and what the reward adapters receive as columns) are
written through `tooltune.schema.rows`, which names and encodes their columns: ``prompt`` (chat messages
from `tooltune.prompts.render_prompt`), ``answer``, ``sample_id``, ``category``, ``tools``, ``meta`` and,
under a template whose tools go to the chat template (``native``), ``chat_tools``.
verl rows (its RL dataset schema): data_source, prompt (chat messages), ability,
    reward_model {"style": "rule", "ground_truth": <answer JSON string>},
    extra_info {"index", "sample_id", "category", "template", "history", "tools", "meta", and
    "chat_tools" under ``native``}.
    An export holding environment tasks (``meta["env"]``) is agentic: every row also gets
    ``agent_name`` (``tool_agent`` for a task, ``single_turn_agent`` otherwise) and, in extra_info,
    ``tools_kwargs`` (the task for the tools), ``tool_selection`` (its tool names) and
    ``need_tools_kwargs`` (`tooltune.integrations.verl.config.agentic_fields`), and the parquet file gets
    verl's tool config beside it (`tool_config_path`: train.parquet -> train.tools.yaml).
JSON strings keep the Arrow schema fixed whatever shapes tools and meta take across rows.

`EXPORT_FORMATS` is the registry of writers by format name (`tooltune.config.Registry`): a writer
takes the samples, the output path and the prompt, and returns the number of rows written.

Every export renders under one `tooltune.prompts.PromptControls` (template, system prompt, history
form, reasoning history; a template name stands for the defaults with that template), resolved once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tooltune.config import Registry
from tooltune.integrations.verl.config import agentic_fields, is_task, write_tool_config
from tooltune.prompts import (
    PromptLike,
    ResolvedPrompt,
    as_prompt,
    prompt_tools_json,
    render_prompt,
)
from tooltune.schema import Sample, read_jsonl, rows, write_jsonl

logger = logging.getLogger(__name__)

VERL_ABILITY = "tool_calling"


def _chat_tools(sample: Sample, prompt: ResolvedPrompt) -> dict[str, str]:
    """The ``chat_tools`` entry of a row under a template that needs it, else nothing."""
    tools = prompt_tools_json(sample, prompt)
    return {} if tools is None else {rows.CHAT_TOOLS: tools}


def to_trl_rows(samples: Iterable[Sample], prompt: PromptLike = "tool_n1") -> list[dict[str, Any]]:
    """One TRL row per sample (columns in the module docstring) rendered under `prompt`; the trainer
    adds `prompt_index`."""
    p = as_prompt(prompt)
    return [
        {
            rows.PROMPT: render_prompt(s, p),
            rows.ANSWER: rows.calls_column(s.answer),
            rows.SAMPLE_ID: s.id,
            rows.CATEGORY: s.category,
            rows.TOOLS: rows.tools_column(s.tools),
            rows.META: rows.meta_column(s.meta),
            **_chat_tools(s, p),
        }
        for s in samples
    ]


def to_hf_dataset(samples: Iterable[Sample], prompt: PromptLike = "tool_n1") -> Any:
    """A `datasets.Dataset` of TRL rows."""
    import datasets  # deferred: datasets takes about a second to import

    trl_rows = to_trl_rows(samples, prompt)
    if not trl_rows:
        return datasets.Dataset.from_dict({k: [] for k in rows.TRL_COLUMNS})
    # native histories carry tool_calls whose arguments differ in shape between rows: those go as JSON
    return datasets.Dataset.from_list(trl_rows, on_mixed_types="use_json")


def to_verl_rows(
    samples: Iterable[Sample], prompt: PromptLike = "tool_n1", data_source: str | None = None
) -> list[dict[str, Any]]:
    """verl RL rows rendered under `prompt`; `data_source` defaults to `tooltune/<sample source>` (verl
    routes rewards by it)."""
    p = as_prompt(prompt)
    samples = list(samples)
    agentic = any(is_task(s) for s in samples)
    out = []
    for i, s in enumerate(samples):
        answer = rows.calls_column(s.answer)
        messages = render_prompt(s, p)
        agent, agent_info = agentic_fields(s) if agentic else (None, {})
        out.append(
            {
                **({"agent_name": agent} if agent else {}),
                "data_source": data_source or f"tooltune/{s.source or 'unknown'}",
                "prompt": messages,
                "ability": VERL_ABILITY,
                "reward_model": {"style": "rule", "ground_truth": answer},
                "extra_info": {
                    "index": i,
                    rows.SAMPLE_ID: s.id,
                    rows.CATEGORY: s.category,
                    "template": p.name,
                    "history": p.history,
                    rows.TOOLS: rows.tools_column(s.tools),
                    rows.META: rows.meta_column(s.meta),
                    **_chat_tools(s, p),
                    # verl hands compute_score only extra_info: R2IF's CER student needs the prompt
                    rows.PROMPT: messages,
                    **agent_info,
                },
            }
        )
    return out


def tool_config_path(parquet_path: str) -> str:
    """Where an agentic export's verl tool config goes: beside the parquet file, ``.tools.yaml``."""
    return str(parquet_path).removesuffix(".parquet") + ".tools.yaml"


def write_verl_parquet(samples: Iterable[Sample], path: str, **kwargs: Any) -> int:
    """verl rows of `samples` as parquet at `path` (and, for environment tasks, the tool config at
    `tool_config_path(path)`); returns the number of rows."""
    import pyarrow as pa  # deferred: only parquet needs pyarrow
    import pyarrow.parquet as pq  # deferred: only parquet needs pyarrow

    samples = list(samples)
    verl_rows = to_verl_rows(samples, **kwargs)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    pq.write_table(pa.Table.from_pylist(verl_rows), path)
    tasks = [s for s in samples if is_task(s)]
    if tasks:
        n = write_tool_config(tasks, tool_config_path(path))
        logger.info("wrote verl's tool config (%d tools) to %s", n, tool_config_path(path))
    return len(verl_rows)


def export(inputs: Sequence[str], fmt: str, out: str, prompt: PromptLike = "tool_n1") -> int:
    """Read canonical JSONL file(s) and write `fmt` to `out` (a file for jsonl/verl, a folder for hf),
    rendered under `prompt` (jsonl writes the samples themselves).

    Every input is read before anything is written: a bad line raises a SchemaError naming `file:line`
    and the cause (`tooltune.schema.read_jsonl`) and leaves `out` untouched."""
    write = EXPORT_FORMATS.get(fmt)
    samples: list[Sample] = []
    for path in inputs:
        samples.extend(read_jsonl(path))
    return write(samples, out, prompt)


def _write_samples(samples: list[Sample], out: str, prompt: PromptLike) -> int:
    return write_jsonl(samples, out)  # the canonical samples themselves: nothing is rendered


def _write_verl(samples: list[Sample], out: str, prompt: PromptLike) -> int:
    return write_verl_parquet(samples, out, prompt=as_prompt(prompt))


def _write_hf(samples: list[Sample], out: str, prompt: PromptLike) -> int:
    ds = to_hf_dataset(samples, as_prompt(prompt))
    ds.save_to_disk(out)
    return len(ds)


Writer = Callable[[list[Sample], str, PromptLike], int]
EXPORT_FORMATS: Registry[Writer] = Registry("export format", key="format")
EXPORT_FORMATS.add("jsonl", _write_samples)
EXPORT_FORMATS.add("hf", _write_hf)
EXPORT_FORMATS.add("verl", _write_verl)
