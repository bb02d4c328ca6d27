"""Training rows from canonical samples: TRL GRPO rows (with `prompt_index`) and SFT prompt/completion rows.

The columns are `tooltune.schema.rows`'s. Under a template whose tools go to the chat template
(``native``), every row also carries them as the JSON string column ``chat_tools``: whoever applies the
chat template to the row's prompt passes `tooltune.schema.rows.row_tools(row)` as ``tools=``.

Missing or malformed ground truth stops the run before the first step with a message naming the record
(file:line from `tooltune.schema.read_jsonl`, or the sample id for in-memory rows).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tooltune.data.export import to_trl_rows
from tooltune.prompts import (
    PromptLike,
    ResolvedPrompt,
    as_prompt,
    encode_chat,
    prompt_tools_json,
    render_answer,
    render_prompt,
)
from tooltune.schema import Sample, SchemaError, calls_from_any, read_jsonl
from tooltune.schema import rows as row_format
from tooltune.schema.rows import ANSWER, CHAT_TOOLS, COMPLETION, PROMPT, PROMPT_INDEX, SAMPLE_ID, row_tools

logger = logging.getLogger(__name__)


def load_samples(path: str, limit: int = 0, key: str = "data.train") -> list[Sample]:
    """Read canonical JSONL; a record without ground truth raises SchemaError naming file:line."""
    if not path:
        raise SchemaError(f"{key}: no file given")
    if not Path(path).is_file():
        raise SchemaError(f"{key}: file not found: {path}")
    samples = read_jsonl(path, limit=limit or None)
    if not samples:
        raise SchemaError(f"{key}: {path} holds no samples")
    return samples


def grpo_rows(samples: Sequence[Sample], prompt: PromptLike) -> list[dict[str, Any]]:
    """TRL rows (`tooltune.data.export.to_trl_rows` columns, ``chat_tools`` included under ``native``),
    rendered under `prompt` (`PromptControls`, e.g. a training config's `data` section, or a template
    name), plus the `prompt_index` the filter keys on."""
    out = [dict(r) for r in to_trl_rows(samples, prompt)]
    check_rows(out)
    for i, row in enumerate(out):
        row[PROMPT_INDEX] = i
    return out


def _add_chat_tools(row: dict[str, Any], sample: Sample, template: ResolvedPrompt) -> None:
    """The row's chat-template tools (``chat_tools``) under a template that needs them."""
    tools = prompt_tools_json(sample, template)
    if tools is not None:
        row[CHAT_TOOLS] = tools


def check_rows(training_rows: Sequence[dict[str, Any]], source: str = "training rows") -> None:
    """Every row needs a prompt and a JSON ground-truth answer list; raise naming `source`, the record and
    the column otherwise (`tooltune.schema.rows.check_rows`)."""
    row_format.check_rows(training_rows, (PROMPT, ANSWER), source, "GRPO")


def sft_rows(
    samples: Sequence[Sample],
    prompt: PromptLike,
    with_reasoning: bool = True,
    target: str = "answer",
    sample_reasoning: bool = True,
) -> list[dict[str, Any]]:
    """Conversational prompt/completion rows rendered under `prompt` (`PromptControls` or a template
    name): loss on the rendered target answer only.

    target: "answer" (ground truth) or "meta.<key>" (calls stored in the sample's meta, e.g. the
    quickstart's imperfect demonstrations); samples without that key use their answer.
    sample_reasoning: the sample's own meta.reasoning in the reasoning block, else the template's line.
    """
    resolved = as_prompt(prompt)
    key = target.split(".", 1)[1] if target.startswith("meta.") else None
    out, fallback = [], 0
    for s in samples:
        messages = render_prompt(s, resolved)
        calls = s.answer
        if key is not None:
            if key in s.meta:
                calls = calls_from_any(s.meta[key], f"sample {s.id!r}.meta.{key}")
            else:
                fallback += 1
        own = s.meta.get("reasoning")
        reasoning = own if sample_reasoning and isinstance(own, str) else None
        target_text = render_answer(
            calls, resolved.template, reasoning=reasoning, include_reasoning=with_reasoning
        )
        out.append(
            {
                PROMPT: messages,
                COMPLETION: [{"role": "assistant", "content": target_text}],
                SAMPLE_ID: s.id,
            }
        )
        _add_chat_tools(out[-1], s, resolved)
    if fallback:
        logger.info(
            "sft: %d of %d samples have no meta.%s; their ground truth is the target",
            fallback,
            len(samples),
            key,
        )
    return out


def config_grpo_rows(cfg: Any, samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """`grpo_rows` rendered as a training config's `data` section (its prompt controls) says."""
    return grpo_rows(samples, cfg.data)


def config_sft_rows(cfg: Any, samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """`sft_rows` rendered as a training config's `data` and `sft` sections say."""
    return sft_rows(samples, cfg.data, cfg.sft.with_reasoning, cfg.sft.target, cfg.sft.sample_reasoning)


def rows_dataset(rows: Sequence[dict[str, Any]]) -> Any:
    """A `datasets.Dataset` of training rows that gives every row back exactly.

    History messages under ``native`` carry ``tool_calls`` whose arguments take any shape; Arrow
    would merge all of them into one struct type (a key absent from a call comes back as null) or
    refuse arguments whose types differ between rows. Fields whose shape differs between rows are stored
    as JSON instead (``on_mixed_types="use_json"``); rows of plain string messages are stored as before."""
    import datasets  # deferred: datasets takes about a second to import

    return datasets.Dataset.from_list(list(rows), on_mixed_types="use_json")


def drop_long_prompts(rows: list[dict[str, Any]], tokenizer: Any, max_tokens: int) -> tuple[list[dict], int]:
    """Drop rows whose chat-templated prompt (with the row's chat-template tools) exceeds `max_tokens`;
    returns (rows, dropped count)."""
    if max_tokens <= 0:
        return rows, 0
    kept = []
    for row in rows:
        if len(encode_chat(tokenizer, row[PROMPT], True, row_tools(row))) <= max_tokens:
            kept.append(row)
    dropped = len(rows) - len(kept)
    if dropped:
        logger.warning("dropped %d of %d prompts longer than %d tokens", dropped, len(rows), max_tokens)
    for i, row in enumerate(kept):
        row[PROMPT_INDEX] = i
    return kept, dropped
