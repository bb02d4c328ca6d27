"""Rewards by name, and the named compositions (presets) of the papers' recipes.

`REWARDS` and `PRESETS` are `tooltune.config.Registry` objects: a new reward is added with
`REWARDS.register(cls)` (the class's `name`), a new composition with `PRESETS.add(name, spec)`, and an
unknown name is an `UnknownName` listing the closest names. `get_reward(name, **params)` builds one
reward; parameters a reward's constructor does not take are an error, so a typo in a YAML file fails
at start-up rather than training on a default.
"""

from __future__ import annotations

import inspect
from typing import Any

from tooltune.config import Registry
from tooltune.rewards.base import Reward
from tooltune.rewards.binary import BinaryReward, CorrectnessReward, FormatReward
from tooltune.rewards.cer import CERReward
from tooltune.rewards.decision import DecisionReward
from tooltune.rewards.fine_grained import FineGrainedReward
from tooltune.rewards.outcome import OutcomeReward, TurnFormatReward
from tooltune.rewards.smv import SMVReward
from tooltune.rewards.toolrl import ToolRLCorrectnessReward, ToolRLFormatReward, ToolRLReward

REWARDS: Registry[type[Reward]] = Registry("reward", key="reward.components")
for _cls in (
    BinaryReward,
    CorrectnessReward,
    FormatReward,
    FineGrainedReward,
    DecisionReward,
    ToolRLReward,
    ToolRLFormatReward,
    ToolRLCorrectnessReward,
    SMVReward,
    CERReward,
    OutcomeReward,
    TurnFormatReward,
):
    REWARDS.register(_cls)

PRESETS: Registry[dict[str, Any]] = Registry("reward preset", key="reward")
for _name, _spec in {
    # Tool-N1 (arXiv 2505.00024): binary reward, format logged alongside.
    "tool_n1": {"components": {"binary": 1.0, "format": 0.0}, "template": "tool_n1"},
    # Tool-N1 Table 3 ablations.
    "tool_n1_fine_grained": {
        "components": {"fine_grained": 1.0, "binary": 0.0, "format": 0.0},
        "template": "tool_n1",
    },
    "tool_n1_no_format": {"components": {"correctness": 1.0, "format": 0.0}, "template": "tool_n1"},
    # Efficiency paper (arXiv 2606.00135) multi-turn recipe: tool-call correctness only.
    "multi_turn": {"components": {"correctness": 1.0, "format": 0.0}, "template": "tool_n1"},
    # ToolRL (Qian et al. 2025): R_format + R_correct in [-3, 4] on ToolRL's own output format (one JSON
    # object per line with "parameters", optional <response>), exact match logged.
    "toolrl": {
        "components": {"toolrl_format": 1.0, "toolrl_correctness": 1.0, "binary": 0.0},
        "template": "toolrl",
    },
    # R2IF: 3 * R_binary + R_cer + R_smv (needs a student backend: params cer={"student": ...}).
    "r2if": {"components": {"binary": 3.0, "cer": 1.0, "smv": 1.0}, "template": "r2if"},
    # R2IF without the student (CER off), for machines that cannot host one.
    "r2if_no_cer": {"components": {"binary": 3.0, "smv": 1.0}, "template": "r2if"},
    # Agentic (multi-turn in the loop) training: the environment's outcome (BFCL multi-turn checker's
    # semantics: state match + required responses), the share of well-formed turns logged.
    "agentic": {"components": {"outcome": 1.0, "turn_format": 0.0}, "template": "tool_n1"},
}.items():
    PRESETS.add(_name, _spec)


def reward_params(name: str) -> set[str]:
    """Keyword parameters reward `name` accepts."""
    cls = reward_class(name)
    return {p for p in inspect.signature(cls.__init__).parameters if p != "self"}


def reward_class(name: str) -> type[Reward]:
    """The Reward class registered as `name` (`UnknownName` when there is none)."""
    return REWARDS.get(name, key="reward")


def get_reward(name: str, **params: Any) -> Reward:
    """Build reward `name` with `params` (unknown parameters raise ValueError naming them)."""
    unknown = set(params) - reward_params(name)
    if unknown:
        raise ValueError(
            f"reward {name!r} takes no parameter(s) {sorted(unknown)}; it takes {sorted(reward_params(name))}"
        )
    return reward_class(name)(**params)

