"""Agentic rollouts: the model calls tools, sees their results and continues, rewarded on the outcome.

One episode per rollout, on TRL's `rollout_func` hook (TRL 1.16 `GRPOTrainer(rollout_func=…)`), run by
the episode driver's token view (`tooltune.generation.trajectories.run_episodes`): per turn, generate
with the trainer's own generation path (`_generate_single_turn`: transformers or vLLM), decode the calls
with the template's grammar, execute each on the task's environment (`tooltune.environments`), append
the tool messages as the chat template renders them, and continue; an answer without calls, an
unreadable answer, a cut answer, the turn limit or the token budget ends the episode. The trajectory is
one completion whose tool-message tokens carry ``env_mask = 0``: TRL turns it into ``tool_mask`` and
the loss skips them; filtering and down-sampling act on whole trajectories (a trajectory is one row of
its group).

The rewards read the episode's judgement from the columns ``episode_outcome`` and ``episode_format``
(`tooltune.rewards.outcome`); the rollout reads each row's task from the columns of
`tooltune.schema.rows` (`AgenticRollout.needs`, checked by the trainer before training).
Diagnostics per step: turns per rollout, calls, tool errors per call,
seconds in tools, success rate. `EpisodeScorer` is the held-out success rate of greedy episodes on
training rows (`tooltune.generation.trajectories.episode_success`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tooltune.config import ConfigError
from tooltune.environments import EnvironmentSettings, TaskError, environment_of
from tooltune.generation import (
    Episode,
    ToolSuffix,
    episode_stats,
    episode_success,
    reset_environments,
    run_episodes,
)
from tooltune.prompts import PromptTemplate, grammar_for
from tooltune.schema import Sample, ToolSpec, calls_from_any
from tooltune.schema.rows import (
    ANSWER,
    CATEGORY,
    EPISODE_FORMAT,
    EPISODE_OUTCOME,
    META,
    PROMPT,
    SAMPLE_ID,
    TOOLS,
    load_json_column,
    row_tools,
)

logger = logging.getLogger(__name__)


def task_from_row(row: dict[str, Any]) -> Sample:
    """The environment task of a training row (`tooltune.data.export.to_trl_rows` columns)."""
    meta = load_json_column(row.get(META)) or {}
    tools = load_json_column(row.get(TOOLS)) or []
    return Sample(
        id=str(row.get(SAMPLE_ID, "?")),
        source="",
        category=row.get(CATEGORY) or "multi_step",
        messages=[{"role": "user", "content": ""}],
        tools=[ToolSpec.from_dict(t) for t in tools],
        answer=calls_from_any(row.get(ANSWER) or []),
        meta=dict(meta),
    )


def check_task_rows(rows: Sequence[dict[str, Any]], key: str, environment: str = "") -> None:
    """Refuse rows that are not environment tasks, naming `key` (the config key of their file) and the
    first such sample: agentic training runs an episode on every training row and scores its held-out
    curve by episodes on every validation row. With `environment` (``agentic.environment``) a row needs
    ``meta.env`` but not its name."""
    for row in rows:
        task = task_from_row(row)
        try:
            if environment and not isinstance(task.meta.get("env"), dict):
                raise TaskError(f"sample {task.id!r}: meta.env is missing (not an environment task)")
            if not environment:
                environment_of(task)
        except TaskError as exc:
            raise ConfigError(
                f"{key}: {exc}; agentic training runs episodes on {key}, so it must hold environment tasks "
                "(tooltune data tasks bfcl|synthetic_chain|mcp)") from None


class AgenticRollout:
    """TRL `rollout_func`: one episode per prompt row (rows already repeat each prompt n times).

    Needs the rows of the batch: `ToolTuneGRPOTrainer` keeps them in `tooltune.batch_inputs` before it
    generates."""

    needs = (TOOLS, META)
    """The row columns an episode's task is read from (`task_from_row`)."""
    produces = (EPISODE_OUTCOME, EPISODE_FORMAT)
    """The reward-input columns each rollout gets (`tooltune.rewards.outcome` reads them)."""

    def __init__(self, template: str | PromptTemplate, max_turns: int, max_tokens: int, environment: str = "",
                 settings: EnvironmentSettings | None = None) -> None:
        self.grammar = grammar_for(template)
        self.max_turns, self.max_tokens, self.environment = max_turns, max_tokens, environment
        self.settings = settings
        self._suffix: ToolSuffix | None = None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        state = getattr(trainer, "tooltune", None)
        rows = state.batch_inputs if state is not None else None
        if rows is None or len(rows) != len(prompts):
            raise RuntimeError("agentic rollouts need ToolTuneGRPOTrainer (it passes the batch's rows)")
        envs = reset_environments([task_from_row(r) for r in rows], self.environment, self.settings)
        prompt_ids, _, _ = trainer._tokenize_prompts(prompts)  # with the rows' chat-template tools
        if self._suffix is None:
            self._suffix = ToolSuffix(trainer.processing_class, trainer.chat_template_kwargs)

        def generate(ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]] | None]:
            return trainer._generate_single_turn(ids, None, {}, 1)

        eps = run_episodes(generate, prompt_ids, envs, trainer.processing_class, self.grammar,
                           self.max_turns, self.max_tokens, self._suffix, [row_tools(r) for r in rows])
        log_episodes(trainer._metrics["train" if trainer.model.training else "eval"], eps)
        logps = None if any(ep.logprobs is None for ep in eps) else [ep.logprobs for ep in eps]
        return {
            "prompt_ids": [list(p) for p in prompt_ids],
            "completion_ids": [ep.completion_ids for ep in eps],
            "logprobs": logps,
            "env_mask": [ep.env_mask for ep in eps],
            EPISODE_OUTCOME: [ep.outcome.score if ep.outcome else 0.0 for ep in eps],
            EPISODE_FORMAT: [ep.format_share for ep in eps],
        }


def log_episodes(metrics: dict[str, list[float]], eps: Sequence[Episode]) -> None:
    """Per-step diagnostics of a batch of episodes into TRL's metric lists."""
    for name, value in episode_stats(eps).items():
        metrics[f"tooltune/agentic_{name}"].append(value)


class EpisodeScorer:
    """Held-out success rate of greedy episodes on training-style rows (`HeldOutEval`'s scorer)."""

    def __init__(self, template: str | PromptTemplate, max_turns: int, max_new_tokens: int, batch_size: int,
                 environment: str = "", settings: EnvironmentSettings | None = None) -> None:
        self.template, self.max_turns, self.environment = template, max_turns, environment
        self.settings = settings
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size

    def __call__(self, model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> float:
        result = episode_success(
            model, tokenizer, [r[PROMPT] for r in rows], [task_from_row(r) for r in rows], self.template,
            self.max_turns, self.max_new_tokens, self.batch_size, self.environment, self.settings,
        )
        return result["success"]
