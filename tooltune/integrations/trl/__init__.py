"""TRL: tooltune's environments inside a plain `trl.GRPOTrainer(environment_factory=...)` script.

`environments`: generated environment classes (one method per task tool), their factories (TRL's dict
form) and dataset rows, the MCP form (`mcp_environment_class`), and `final_answer_reward`. tooltune's own
trainer (`tooltune.training.grpo.ToolTuneGRPOTrainer`, agentic episodes through TRL's ``rollout_func`` in
`tooltune.training.agentic`) is the other route; docs/integrations.md says which to use when.
"""

from tooltune.integrations.trl.environments import (
    ENVIRONMENT_COLUMN,
    REWARDS,
    TASK_COLUMN,
    RewardingTRLEnvironment,
    TRLEnvironment,
    environment_class,
    environment_factories,
    environment_rows,
    final_answer_reward,
    mcp_environment_class,
)

__all__ = ["ENVIRONMENT_COLUMN", "REWARDS", "TASK_COLUMN", "RewardingTRLEnvironment", "TRLEnvironment",
           "environment_class", "environment_factories", "environment_rows", "final_answer_reward",
           "mcp_environment_class"]
