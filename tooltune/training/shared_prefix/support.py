"""What both shared-prefix paths rely on: the model inside its wrappers, whether a path applies to a model
(and why not), the first row of each group, and the log-probs of completion tokens from logits.

The refusals are written once here and asked in two places: the trainer's hooks ask `model_problem` once
per run to choose a path, and `grouped_logps` asks `call_problem` on every call (the prompt width and
activation checkpointing are known only then).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from tooltune.training.shared_prefix.packed_attention import NAME as PACKED_ATTENTION

PATHS = ("kv_cache", "packed")
"""The two ways of sharing a prompt: its KV cache reused by the completions (`logps`), or each group packed
into one row of one forward (`packed`)."""

MASKED_IMPLEMENTATIONS = (PACKED_ATTENTION, "sdpa", "eager", "flex_attention")
"""Attention implementations that take the packed pattern (`packed`)."""


def without_wrappers(model: Any) -> Any:
    """The model inside DDP / FSDP / DeepSpeed wrappers (each keeps it as `.module`); a PEFT model stays."""
    while isinstance(getattr(model, "module", None), torch.nn.Module) and model.module is not model:
        model = model.module
    return model


def base_model(model: Any) -> Any:
    """The transformers model inside DDP / FSDP / DeepSpeed and PEFT wrappers."""
    model = without_wrappers(model)
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def attention_implementation(model: Any) -> str:
    """The attention implementation the model runs (`config._attn_implementation`), "" when unknown."""
    config = getattr(base_model(model), "config", None)
    return str(getattr(config, "_attn_implementation", "") or "")


def checkpointing_active(model: Any) -> bool:
    """Whether a module of `model` recomputes its activations in this mode (training with gradient
    checkpointing on): transformers then drops the KV cache inside the checkpointed layers."""
    return any(getattr(m, "gradient_checkpointing", False) and m.training for m in model.modules())


def model_problem(model: Any, path: str) -> str | None:
    """Why `path` ("kv_cache" or "packed") cannot share prompts for this model, whatever the batch, or None
    when it can. `model` may be wrapped (DDP, FSDP, DeepSpeed, PEFT)."""
    if path not in PATHS:
        raise ValueError(f"path: one of {PATHS}, got {path!r}")
    base = base_model(model)
    config = getattr(base, "config", None)
    if config is None:
        return "the model has no config"
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder models are not supported"
    peft_config = getattr(without_wrappers(model), "active_peft_config", None)
    if peft_config is not None and getattr(peft_config, "is_prompt_learning", False):
        return "a prompt-learning PEFT adapter adds virtual tokens to every row"
    cls = type(base)
    dynamic_cache = getattr(cls, "_supports_default_dynamic_cache", lambda: True)()
    if getattr(cls, "_is_stateful", False) or not dynamic_cache:
        return f"{cls.__name__} is stateful or hybrid: it has no standard KV cache"
    layers = DynamicCache(config=config).layers
    if any(type(layer) is not DynamicLayer for layer in layers):
        kinds = sorted({type(layer).__name__ for layer in layers})
        return f"cache layers {kinds} (sliding-window, linear or hybrid attention) are not supported"
    params = inspect.signature(base.forward).parameters
    for needed in ("position_ids", "past_key_values") if path == "kv_cache" else ("position_ids",):
        if needed not in params:
            return f"{cls.__name__}.forward takes no {needed}"
    if path == "packed":
        kind = attention_implementation(base)
        if kind not in MASKED_IMPLEMENTATIONS:
            takes = ", ".join(MASKED_IMPLEMENTATIONS)
            return f"attention implementation {kind or 'unknown'!r} takes no custom mask ({takes} do)"
    return None


def call_problem(model: Any, prompt_columns: int, path: str) -> str | None:
    """Why `path` cannot share prompts of `prompt_columns` columns for this model in its current mode, or
    None when it can: `model_problem`, then the prompt width, then (KV cache) activation checkpointing."""
    problem = model_problem(model, path)
    if problem is not None:
        return problem
    if prompt_columns < 2:
        return "prompts of fewer than 2 columns leave nothing to share"
    if path == "kv_cache" and checkpointing_active(base_model(model)):
        return "gradient checkpointing drops the KV cache in training mode"
    return None


def first_rows(groups: torch.Tensor) -> torch.Tensor:
    """[G] the first row of each group (`groups`: 0..G-1 per row): its prompt stands for the group's."""
    rows = groups.numel()
    firsts = torch.full((int(groups.max()) + 1,), rows, dtype=torch.long, device=groups.device)
    return firsts.scatter_reduce(0, groups, torch.arange(rows, device=groups.device), "amin")


def completion_labels(completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """The completion tokens as labels of TRL's fused LM head: -100 (ignored) where the mask is 0."""
    return completion_ids.masked_fill(completion_mask == 0, -100)


def token_logps(
    logits: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float,
    return_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (and entropies) of `completion_ids` from the logits that predict them ([B, C, V]), zero
    where `completion_mask` is 0."""
    logp_all = torch.log_softmax(logits / temperature, dim=-1)
    pad = completion_mask == 0
    logps = logp_all.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1).masked_fill(pad, 0.0)
    entropy = None
    if return_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1).masked_fill(pad, 0.0)
    return logps, entropy
