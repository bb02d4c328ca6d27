"""The packed pattern's attention as blocks of sdpa: `tooltune_packed`, registered in transformers'
`AttentionInterface`.

A packed row is [prompt columns 0..P'-1] followed by k segments of S positions (see
`tooltune.training.shared_prefix.packed`). Its attention pattern has two kinds of blocks:

- the prompt attends to itself causally: one sdpa call on the [P', P'] block (`is_causal` when no
  prompt column of the chunk is padding, else a boolean mask);
- each segment attends to the prompt and causally to itself: one sdpa call with the segments as a batch
  of G k rows, each over its group's prompt keys/values (repeated k times, as the KV-cache path repeats
  its cache) followed by its own, with a boolean [S, P' + S] mask.

So only the pairs the pattern allows are computed, (P'^2 + k S (P' + S)) per group, where the dense mask
that plain sdpa takes costs (P' + k S)^2: at P' = 1023, k = 8, S = 129 that is 2.2M against 4.2M pairs.

`packed_attention_forward` is transformers' `sdpa_attention_forward` for every call without the
`tt_packed` keyword: a model switched to `tooltune_packed` (`use_packed_attention`) generates, and runs
the ordinary and KV-cache paths, exactly as under `sdpa`. Its mask builder is sdpa's. The keyword reaches
the function the way transformers passes attention keywords, from the model's forward through each
decoder layer (a checkpointed layer keeps it for its recomputation), so nothing else changes: one
forward, one backward. `_attn_implementation` is not saved with the model, so a saved checkpoint loads
as the implementation it was loaded with. Code that picks its path by the implementation's name sees
`tooltune_packed`, not `sdpa`: the rollout sampler's cascade decoding accepts only `sdpa` and `eager`,
and fell back to copying each group's prompt keys to every rollout (3.4-3.8 GB more for a step of 32
rollouts of ~2,000-token prompts). `as_sdpa` shows such a model as `sdpa` while it generates.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward, use_gqa_in_sdpa
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from tooltune.generation.cascade_attention import attention_named

NAME = "tooltune_packed"


@dataclass
class PackedBlocks:
    """The blocks of one chunk's packed rows, built once per forward and read by every layer."""

    prefix: int
    """P': shared prompt columns per row."""
    segments: int
    """k: segments per row."""
    length: int
    """S: positions per segment."""
    prefix_mask: torch.Tensor | None
    """[G, 1, P', P'] bool (causal and valid), None when no prompt column is padding (`is_causal`)."""
    segment_mask: torch.Tensor
    """[G k, 1, S, P' + S] bool: the valid prompt columns, then causal and valid in the segment."""


def packed_blocks(valid: torch.Tensor, prefix: int, segments: int, length: int) -> PackedBlocks:
    """The blocks for packed rows whose tokens are `valid` ([G, P' + k S] bool)."""
    groups = valid.size(0)
    device = valid.device
    prefix_valid = valid[:, :prefix]
    prefix_mask = None
    if prefix and not bool(prefix_valid.all()):
        idx = torch.arange(prefix, device=device)
        causal = idx[None, :] <= idx[:, None]
        prefix_mask = causal[None, None] & prefix_valid[:, None, None, :]
    seg_valid = valid[:, prefix:].reshape(groups * segments, length)
    idx = torch.arange(length, device=device)
    own = (idx[None, :] <= idx[:, None])[None] & seg_valid[:, None, :]  # [G k, S, S]
    shared = prefix_valid.repeat_interleave(segments, dim=0)[:, None, :].expand(-1, length, -1)
    segment_mask = torch.cat([shared, own], dim=2)[:, None]
    return PackedBlocks(prefix, segments, length, prefix_mask, segment_mask)


def _sdpa(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    dropout: float,
    scaling: float | None,
) -> torch.Tensor:
    """torch sdpa in [B, H, T, D] with the key/value heads repeated (or sdpa's own GQA where it is fast)."""
    groups = getattr(module, "num_key_value_groups", 1)
    extra = {}
    if groups > 1:
        if use_gqa_in_sdpa(mask, key, value):
            extra["enable_gqa"] = True
        else:
            key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling,
        is_causal=mask is None and query.size(2) > 1, **extra,
    )


def packed_attention_forward(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    tt_packed: PackedBlocks | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """sdpa on the blocks of `tt_packed` (the mask argument is then a placeholder); sdpa as transformers
    runs it otherwise. Query [G, H, L, D], key/value [G, Hkv, L, D]; returns [G, L, H, D]."""
    if tt_packed is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if kwargs.get("softcap") is not None:
        raise ValueError(f"{NAME}: attention logit softcapping is not supported")
    blocks = tt_packed
    p, k, s = blocks.prefix, blocks.segments, blocks.length
    groups, heads, _, dim = query.shape
    kv_heads = key.size(1)

    def segments(x: torch.Tensor) -> torch.Tensor:  # [G, h, k S, D] -> [G k, h, S, D]
        h = x.size(1)
        return x[:, :, p:].reshape(groups, h, k, s, dim).transpose(1, 2).reshape(groups * k, h, s, dim)

    def with_prefix(x: torch.Tensor) -> torch.Tensor:  # the group's prompt keys before each segment's own
        shared = x[:, :, :p].unsqueeze(1).expand(groups, k, kv_heads, p, dim)
        shared = shared.reshape(groups * k, kv_heads, p, dim)
        return torch.cat([shared, segments(x)], dim=2)

    parts = []
    if p:
        prompt = (query[:, :, :p], key[:, :, :p], value[:, :, :p])
        parts.append(_sdpa(module, *prompt, blocks.prefix_mask, dropout, scaling))
    out = _sdpa(
        module, segments(query), with_prefix(key), with_prefix(value), blocks.segment_mask, dropout, scaling
    )
    parts.append(out.reshape(groups, k, heads, s, dim).transpose(1, 2).reshape(groups, heads, k * s, dim))
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None


def register() -> None:
    """Register `tooltune_packed` (attention function and sdpa's mask builder) with transformers."""
    AttentionInterface.register(NAME, packed_attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def use_packed_attention(model: Any) -> bool:
    """Switch a model that runs `sdpa` to `tooltune_packed` (sdpa for every other call); True when the
    model now runs it. `model` is the transformers model (not a wrapper)."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current == NAME:
        return True
    if current != "sdpa" or not hasattr(model, "set_attn_implementation"):
        return False
    register()
    model.set_attn_implementation(NAME)
    return config._attn_implementation == NAME


def as_sdpa(model: Any) -> contextlib.AbstractContextManager:
    """Within the block a model switched to `tooltune_packed` reports `sdpa`, the attention it runs for
    every call without ``tt_packed`` (generation), so that code choosing its path by the implementation's
    name treats it as sdpa. `model` is the transformers model (not a wrapper); other models pass through."""
    if getattr(getattr(model, "config", None), "_attn_implementation", None) != NAME:
        return contextlib.nullcontext()
    return attention_named(model, "sdpa")
