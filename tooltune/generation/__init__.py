"""Generation: completions from any backend, and the one render -> generate n -> score loop.

Backends (`Backend.generate(list[GenerationRequest]) -> list[list[str]]`, n texts per request): a
local Hugging Face model, an OpenAI-compatible endpoint, a file of raw completions, a scripted policy.
`BackendConfig` chooses one the same way for every command (data selection, the CER student,
evaluation). `score_samples` renders samples, generates n completions each and scores them with the
shared exact-match verdict: held-out evaluation, the difficulty filter and training diagnostics use it.
`episodes` is the one multi-turn episode driver (agentic training, BFCL multi-turn, ACEBench agent);
`conversations` its message view (benchmarks), `trajectories` its token view (training rollouts and the
greedy episode success rate).
"""

from tooltune.generation.backends import (
    BACKENDS,
    Backend,
    BackendError,
    EndpointUnavailable,
    GenerationFailure,
    GenerationRequest,
    HFBackend,
    MissingPrediction,
    OpenAIBackend,
    ReplayBackend,
    ScriptedBackend,
    load_predictions,
    make_backend,
)
from tooltune.generation.base import Tolerant, stream_results
from tooltune.generation.config import BackendConfig, backend_config, make_backend_from
from tooltune.generation.conversations import EpisodeConfig, MessageContext
from tooltune.generation.episodes import (
    ASK,
    CALLS_ONLY,
    END,
    Dialogue,
    Episode,
    EpisodeRun,
    NamedResult,
    Reply,
    SimulatedUser,
    Step,
    StopRules,
    drive,
    step_decoder,
    tool_messages,
)
from tooltune.generation.scoring import Sampling, generate_in_chunks, score_prompts, score_samples
from tooltune.generation.trajectories import (
    TokenContext,
    ToolSuffix,
    episode_stats,
    episode_success,
    evaluate_episodes,
    reset_environments,
    run_episodes,
    trajectory_budget,
)

__all__ = [
    "ASK",
    "BACKENDS",
    "CALLS_ONLY",
    "END",
    "Dialogue",
    "SimulatedUser",
    "Episode",
    "EpisodeConfig",
    "EpisodeRun",
    "MessageContext",
    "NamedResult",
    "Reply",
    "Step",
    "StopRules",
    "TokenContext",
    "ToolSuffix",
    "drive",
    "episode_stats",
    "episode_success",
    "evaluate_episodes",
    "reset_environments",
    "run_episodes",
    "step_decoder",
    "tool_messages",
    "trajectory_budget",
    "Backend",
    "BackendConfig",
    "BackendError",
    "EndpointUnavailable",
    "GenerationFailure",
    "GenerationRequest",
    "HFBackend",
    "MissingPrediction",
    "OpenAIBackend",
    "ReplayBackend",
    "Sampling",
    "ScriptedBackend",
    "backend_config",
    "generate_in_chunks",
    "load_predictions",
    "make_backend",
    "make_backend_from",
    "score_prompts",
    "score_samples",
    "stream_results",
    "Tolerant",
]
