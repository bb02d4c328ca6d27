"""Episode rewards of agentic training: the environment's outcome, and the share of well-formed turns.

In an agentic rollout the model calls tools, sees their results and continues; the completion is the
whole trajectory and no single call block is "the answer". The rollout
(`tooltune.training.agentic`) runs the episode and hands each rollout's judgement to the rewards as
dataset-style columns:

- ``episode_outcome``: the environment's outcome score in [0, 1]. For BFCL-style environments this
  is the multi-turn checker's semantics, R = 1[state reached = goal state ∧ required responses given]
  (BFCL v3 multi-turn, Patil et al. 2025); for the synthetic chains, 1[executed calls = goal calls].
- ``episode_format``: the share of assistant turns whose text passed the template grammar's strict
  format (Tool-N1's R_format, arXiv 2505.00024 Eq. 2, averaged over the turns of the episode), an
  optional per-turn shaping term.

Both are read, not recomputed: the environment is the only judge of the state it holds.
"""

from __future__ import annotations

from typing import Any

from tooltune.rewards.base import ParseCache, Reward
from tooltune.schema import ToolCall
from tooltune.schema.rows import EPISODE_FORMAT, EPISODE_OUTCOME


def _column(columns: dict[str, Any], name: str) -> float:
    value = columns.get(name)
    if value is None:
        raise ValueError(f"no {name!r} column: this reward needs agentic rollouts (training.agentic)")
    return float(value)


class OutcomeReward(Reward):
    """R_outcome = the environment's outcome score of the episode, in [0, 1]."""

    name = "outcome"
    needs = (EPISODE_OUTCOME,)

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        return _column(columns, EPISODE_OUTCOME)


class TurnFormatReward(Reward):
    """R_turn_format = (1/T) Σ_t R_format(turn t): the share of well-formed assistant turns."""

    name = "turn_format"
    needs = (EPISODE_FORMAT,)

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        return _column(columns, EPISODE_FORMAT)
