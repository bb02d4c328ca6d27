"""Generation: completions from any backend, and the one render -> generate n -> score loop.

Backends (`Backend.generate(list[GenerationRequest]) -> list[list[str]]`, n texts per request): a
local Hugging Face model, an OpenAI-compatible endpoint, a file of raw completions, a scripted policy.
`BackendConfig` chooses one the same way for every command (data selection, the CER student,
evaluation). `score_samples` renders samples, generates n completions each and scores them with the
shared exact-match verdict: held-out evaluation, the difficulty filter and training diagnostics use it.
"""

from tooltune.generation.backends import (
    BACKENDS,
    Backend,
    BackendError,
    GenerationRequest,
    HFBackend,
    MissingPrediction,
    OpenAIBackend,
    ReplayBackend,
    ScriptedBackend,
    load_predictions,
    make_backend,
)
from tooltune.generation.config import BackendConfig, backend_config, make_backend_from
from tooltune.generation.scoring import Sampling, generate_in_chunks, score_prompts, score_samples

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendConfig",
    "BackendError",
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
]
