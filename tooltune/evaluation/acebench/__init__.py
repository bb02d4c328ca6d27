"""ACEBench (English), scored as ACEBench's official code scores it (see `scoring` for the rules).

The package has the inner layout every benchmark package of `tooltune.evaluation` shares (a family has
only the modules it needs):

- `benchmark`: the registered `Benchmark` (`AceBenchBenchmark`: prepare, score, weighted summary);
- `data`: the data files, the normal and special entries as samples, the agent entries;
- `scoring`: one normal or special completion's verdict and ACEBench's weighted summary;
- `official`: ACEBench's checker for normal and special entries, rule for rule, and the corrected rules;
- `official_decode`: ACEBench's decoding of a model's text, rule for rule, without `eval`;
- `agent`: the agent categories played as episodes against the simulated APIs of
  `tooltune.environments.acebench_apis`, judged on the state reached.

The names below are the family's public ones (`from tooltune.evaluation import acebench`).
"""

from tooltune.evaluation.acebench.agent import (
    AGENT_SYSTEM,
    FINISH,
    NO_CALL_REPLY,
    USER_OPENING,
    USER_SIM_SKIP_MESSAGE,
    USER_SYSTEM,
    AgentConfig,
    AgentRun,
    AgentVerdict,
    agent_plan,
    agent_scripted_policy,
    end_to_end,
    milestone_text,
    process_accuracy,
    run_agent,
    scripted_user_policy,
)
from tooltune.evaluation.acebench.data import (
    AGENT_CATEGORIES,
    AgentEntry,
    categories_in,
    data_files,
    load_agent_entries,
    load_samples,
)
from tooltune.evaluation.acebench.scoring import (
    AGENT_SKIP_MESSAGE,
    SYSTEM_SUFFIX,
    WEIGHTS,
    reference_answer,
    score,
    scores,
)

__all__ = [
    "AGENT_CATEGORIES",
    "AGENT_SKIP_MESSAGE",
    "AGENT_SYSTEM",
    "FINISH",
    "NO_CALL_REPLY",
    "SYSTEM_SUFFIX",
    "USER_OPENING",
    "USER_SIM_SKIP_MESSAGE",
    "USER_SYSTEM",
    "WEIGHTS",
    "AgentConfig",
    "AgentEntry",
    "AgentRun",
    "AgentVerdict",
    "agent_plan",
    "agent_scripted_policy",
    "categories_in",
    "data_files",
    "end_to_end",
    "load_agent_entries",
    "load_samples",
    "milestone_text",
    "process_accuracy",
    "reference_answer",
    "run_agent",
    "score",
    "scores",
    "scripted_user_policy",
]
