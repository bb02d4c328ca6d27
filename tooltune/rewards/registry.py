"""Rewards by name, and the named compositions (presets) of the papers' recipes.

`get_reward(name, **params)` builds one reward; parameters a reward's constructor does not take are
an error, so a typo in a YAML file fails at start-up rather than training on a default.
"""

from __future__ import annotations

import inspect
from typing import Any

from tooltune.rewards.base import Reward
from tooltune.rewards.binary import BinaryReward, CorrectnessReward, FormatReward
from tooltune.rewards.cer import CERReward
from tooltune.rewards.fine_grained import FineGrainedReward
from tooltune.rewards.outcome import OutcomeReward, TurnFormatReward
from tooltune.rewards.smv import SMVReward
from tooltune.rewards.toolrl import ToolRLCorrectnessReward, ToolRLFormatReward, ToolRLReward

REWARDS: dict[str, type[Reward]] = {
    cls.name: cls
    for cls in (
        BinaryReward,
        CorrectnessReward,
        FormatReward,
        FineGrainedReward,
        ToolRLReward,
        ToolRLFormatReward,
        ToolRLCorrectnessReward,
        SMVReward,
        CERReward,
        OutcomeReward,
        TurnFormatReward,
    )
}

PRESETS: dict[str, dict[str, Any]] = {
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
}


def reward_params(name: str) -> set[str]:
    """Keyword parameters reward `name` accepts."""
    cls = reward_class(name)
    return {p for p in inspect.signature(cls.__init__).parameters if p != "self"}


def reward_class(name: str) -> type[Reward]:
    try:
        return REWARDS[name]
    except KeyError:
        raise ValueError(f"unknown reward {name!r}; known: {sorted(REWARDS)}") from None


def get_reward(name: str, **params: Any) -> Reward:
    """Build reward `name` with `params` (unknown parameters raise ValueError naming them)."""
    unknown = set(params) - reward_params(name)
    if unknown:
        raise ValueError(
            f"reward {name!r} takes no parameter(s) {sorted(unknown)}; it takes {sorted(reward_params(name))}"
        )
    return reward_class(name)(**params)


def register_reward(cls: type[Reward]) -> type[Reward]:
    """Add a Reward subclass under `cls.name` (usable as a decorator)."""
    REWARDS[cls.name] = cls
    return cls
