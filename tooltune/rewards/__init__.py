"""Rewards for tool-calling RL: Tool-N1 binary (and its ablations), ToolRL-style, R2IF (CER, SMV).

Public entry points:
- `binary_reward(completion, answer, template="tool_n1", format_mode="strict", require_format=True)`
- `get_reward(name, **params)` and `REWARDS` (the registry: `REWARDS.register(cls)` adds a reward),
  `PRESETS` (the papers' compositions)
- `CompositeReward(components={name: weight}, template=..., **params)` -> {component: value, "score": ...}
- `build_reward(config, template)`: the composition of a reward configuration (`RewardConfig` fields),
  the one construction training and verl share
- the engines' entry points live with the engines' other code: TRL's is
  `tooltune.integrations.trl.reward.TRLRewardFunction`, verl's
  `tooltune.integrations.verl.reward.compute_score`
Heavy dependencies (sentence-transformers, the student model) load only when SMV / CER score.
"""

from tooltune.rewards.binary import binary_reward
from tooltune.rewards.composite import CompositeReward, build_reward
from tooltune.rewards.registry import PRESETS, REWARDS, get_reward

__all__ = [
    "PRESETS",
    "REWARDS",
    "CompositeReward",
    "binary_reward",
    "build_reward",
    "get_reward",
]
