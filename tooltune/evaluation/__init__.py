"""Evaluation: generation backends, BFCL (official checker), API-Bank, ACEBench, protocol and reports.

Heavy libraries (torch, transformers, bfcl-eval) are imported only inside the functions that need them.
"""

from tooltune.evaluation.backends import (
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

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "GenerationRequest",
    "HFBackend",
    "MissingPrediction",
    "OpenAIBackend",
    "ReplayBackend",
    "ScriptedBackend",
    "load_predictions",
    "make_backend",
]
