"""TRL: tooltune's environments and rewards inside a plain `trl.GRPOTrainer` script.

`environments`: generated environment classes (one method per task tool), their factories (TRL's dict
form) and dataset rows, the MCP form (`mcp_environment_class`), and `final_answer_reward`.
`chat_template`: the chat template TRL reads tool calls with (`check_chat_template`,
`trl_chat_template`). `reward`: `TRLRewardFunction`, a tooltune reward composition behind TRL's batched
reward-function signature (for any `GRPOTrainer`'s ``reward_funcs``, tooltune's own trainer's too).
tooltune's own trainer (`tooltune.training.grpo.ToolTuneGRPOTrainer`, agentic episodes through TRL's
``rollout_func`` in `tooltune.training.agentic`) is the other route; docs/integrations.md says which to
use when.
"""

from tooltune.integrations.trl.chat_template import (
    chat_template_problem,
    check_chat_template,
    parsed_templates,
    trl_chat_template,
)
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
from tooltune.integrations.trl.reward import TRLRewardFunction

__all__ = ["ENVIRONMENT_COLUMN", "REWARDS", "TASK_COLUMN", "RewardingTRLEnvironment", "TRLEnvironment",
           "TRLRewardFunction", "chat_template_problem", "check_chat_template", "environment_class",
           "environment_factories", "environment_rows", "final_answer_reward", "mcp_environment_class",
           "parsed_templates", "trl_chat_template"]
