"""tooltune: train tool-calling language models with GRPO and verifiable rewards, and evaluate them.

Implements Tool-N1 (binary format+match reward, thinking template), the efficiency methods of
"On Effectiveness and Efficiency of Agentic Tool-calling and RL Training" (pre-rollout filtering,
max-variance down-sampling, evaluation controls) and R2IF (composite reward 3*R_binary + R_cer + R_smv).

The stable API is re-exported here and loaded on first use (so `import tooltune` stays light):

    from tooltune import Sample, ToolCall, parse_completion, render_prompt, binary_reward
    from tooltune import load_config, train, evaluate, make_backend, score_samples

The layers behind it are described in docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API: dict[str, str] = {
    # schema
    "Sample": "tooltune.schema",
    "ToolCall": "tooltune.schema",
    "ToolSpec": "tooltune.schema",
    "Parsed": "tooltune.schema",
    "read_jsonl": "tooltune.schema",
    "write_jsonl": "tooltune.schema",
    # parsing and matching
    "Grammar": "tooltune.parsing",
    "parse_completion": "tooltune.parsing",
    "calls_match": "tooltune.matching",
    "exact_match": "tooltune.matching",
    # environments
    "Environment": "tooltune.environments",
    "make_environment": "tooltune.environments",
    "register_environment": "tooltune.environments",
    # prompts
    "render_prompt": "tooltune.prompts",
    "render_answer": "tooltune.prompts",
    "get_template": "tooltune.prompts",
    # generation
    "make_backend": "tooltune.generation",
    "score_samples": "tooltune.generation",
    "Sampling": "tooltune.generation",
    "GenerationRequest": "tooltune.generation",
    # rewards
    "binary_reward": "tooltune.rewards",
    "get_reward": "tooltune.rewards",
    "CompositeReward": "tooltune.rewards",
    # integrations
    "TRLRewardFunction": "tooltune.integrations.trl",
    # training
    "TrainConfig": "tooltune.training.config",
    "load_config": "tooltune.training.config",
    "train": "tooltune.training.runner",
    "evaluate_episodes": "tooltune.generation",
    # evaluation
    "evaluate": "tooltune.evaluation.runner",
    # models
    "build_tiny_model": "tooltune.models",
    "load_model_and_tokenizer": "tooltune.models",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'tooltune' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
