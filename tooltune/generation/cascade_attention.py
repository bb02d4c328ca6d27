"""Decode attention that reads a group's prompt keys and values once (cascade, or shared-prefix, attention).

n completions of one prompt attend to the same prompt keys. `GroupCache` keeps those keys once per
group (``[groups, kv_heads, prompt_len, head_dim]``, padding columns masked) and each row's generated
keys in its own pre-sized buffer. The attention of a decode step is two partial softmaxes combined
exactly by their log-sum-exp:

- the shared part: the queries of every row of a group and every query head of a KV head are one matrix
  (``[groups, kv_heads, rows_per_group * heads_per_kv, head_dim]``) multiplied once with the group's
  prompt keys, so the prompt is read once per group instead of once per row;
- the row part: each row's queries against its own generated keys.

`cascade_decoding(model)` switches the model's attention to `cascade_attention` for the decode loop
(``config._attn_implementation`` names it; transformers then builds no mask) and restores the previous
implementation after. The cache reaches the attention function as the ``group_cache`` keyword of the
forward call, which transformers passes down to every attention call.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tooltune.generation.rollout_cache import buffers_of_rows

if TYPE_CHECKING:
    import torch

ATTENTION_NAME = "tooltune_cascade"


def unsupported_reason(model: Any) -> str | None:
    """Why `model`'s attention cannot be swapped for `cascade_attention`, or None when it can."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT model
    config = base.config.get_text_config(decoder=True)
    if not getattr(base, "_supports_attention_backend", False):
        return f"{type(base).__name__} does not dispatch its attention through transformers' interface"
    if config._attn_implementation not in ("sdpa", "eager"):
        return f"attention implementation {config._attn_implementation!r} is kept"
    if getattr(config, "attn_logit_softcapping", None) or getattr(config, "use_sliding_window", False):
        return "soft-capped or sliding-window attention"
    if any("sink" in name for name, _ in base.named_parameters()):
        return "attention sinks"
    return None


@contextlib.contextmanager
def cascade_decoding(model: Any) -> Iterator[None]:
    """Within the block `model` attends through `cascade_attention` (a forward call must then pass a
    `GroupCache` as ``past_key_values`` and ``group_cache``)."""
    from transformers import AttentionInterface  # deferred: transformers is heavy

    if ATTENTION_NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION_NAME, cascade_attention)
    with attention_named(model, ATTENTION_NAME):
        yield


@contextlib.contextmanager
def attention_named(model: Any, name: str) -> Iterator[None]:
    """Within the block `model` (or the model inside a PEFT wrapper) runs the attention implementation
    registered as `name`, in its config and its text config; the previous ones are restored after."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    configs = {id(c): c for c in (base.config, base.config.get_text_config(decoder=True))}.values()
    previous = [(c, c._attn_implementation) for c in configs]
    try:
        for config, _ in previous:
            config._attn_implementation = name
        yield
    finally:
        for config, implementation in previous:
            config._attn_implementation = implementation


def cascade_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: Any, scaling: float | None = None, dropout: float = 0.0,
                      group_cache: Any = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Attention of the decode queries ``[rows, heads, 1, head_dim]`` over the group prompt of each row
    (from ``group_cache``) and the row's own keys `key` / `value` (``[rows, kv_heads, generated, dim]``);
    returns ``[rows, 1, heads, head_dim]`` as transformers' attention functions do."""
    import torch  # deferred: torch is heavy

    if group_cache is None or query.shape[2] != 1:
        raise RuntimeError("cascade attention runs decode steps of a GroupCache only")
    layer = group_cache.layers[module.layer_idx]
    rows, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    per_kv = heads // kv_heads
    scale = scaling if scaling is not None else dim**-0.5
    q = query.reshape(rows, kv_heads, per_kv, dim)

    # shared part: [groups, kv_heads, slots * per_kv, dim] against the group's prompt
    groups, slots = layer.prompt_keys.shape[0], group_cache.slots
    if group_cache.dense:
        grouped = q.view(groups, slots, kv_heads, per_kv, dim)
    else:
        grouped = q.new_zeros((groups, slots, kv_heads, per_kv, dim))
        grouped[group_cache.group, group_cache.slot] = q
    grouped = grouped.transpose(1, 2).reshape(groups, kv_heads, slots * per_kv, dim)
    scores = torch.matmul(grouped, layer.prompt_keys.transpose(-1, -2)).float() * scale
    scores = scores + group_cache.prompt_bias
    shared_out, shared_max, shared_sum = _partial_softmax(scores, layer.prompt_values)

    def per_row(t: torch.Tensor) -> torch.Tensor:  # [groups, kv_heads, slots * per_kv, x] -> [rows, ...]
        t = t.view(groups, kv_heads, slots, per_kv, t.shape[-1]).transpose(1, 2)
        if group_cache.dense:
            return t.reshape(rows, kv_heads, per_kv, t.shape[-1])
        return t[group_cache.group, group_cache.slot]

    # row part: each row's queries against its generated keys
    own = torch.matmul(q, key.transpose(-1, -2)).float() * scale
    own_out, own_max, own_sum = _partial_softmax(own, value)

    shared_max, shared_sum, shared_out = per_row(shared_max), per_row(shared_sum), per_row(shared_out)
    top = torch.maximum(shared_max, own_max)
    shared_weight, own_weight = torch.exp(shared_max - top), torch.exp(own_max - top)
    total = shared_sum * shared_weight + own_sum * own_weight
    out = (shared_out * shared_weight + own_out * own_weight) / total
    return out.to(query.dtype).reshape(rows, 1, heads, dim), None


def _partial_softmax(scores: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(unnormalised output, row max, row sum of exp) of softmax(`scores`) @ `values`, in float32."""
    import torch  # deferred: torch is heavy

    top = scores.amax(dim=-1, keepdim=True)
    weights = torch.exp(scores - top)
    out = torch.matmul(weights.to(values.dtype), values).float()
    return out, top, weights.sum(dim=-1, keepdim=True)


@functools.cache
def group_cache_class() -> type:
    """`GroupCache`, a transformers `Cache` of one prompt per group and generated keys per row (built on
    first use: transformers is heavy).

    ``GroupCache.from_prompts(cache, prompt_mask, groups, capacity)`` takes the filled part of a prefilled
    `SlotCache` (one row per group) with its column mask ``[groups, width]`` and the group of each decode
    row (rows of a group consecutive); ``cache.selected(rows)`` keeps the given rows only."""
    import torch  # deferred: torch is heavy
    from transformers.cache_utils import Cache, DynamicLayer  # deferred: transformers is heavy

    class GroupLayer(DynamicLayer):
        """A layer's group prompts ``prompt_keys`` / ``prompt_values`` and its rows' generated keys in
        buffers of `capacity` slots; `update` writes a step's keys after the filled ones and returns
        views of each row's generated part."""

        def __init__(self, prompt: tuple[torch.Tensor, torch.Tensor],
                     buffers: tuple[torch.Tensor, torch.Tensor], length: int = 0) -> None:
            super().__init__()
            self.prompt_keys, self.prompt_values = prompt
            self.key_buffer, self.value_buffer = buffers
            self.length = length
            self.dtype, self.device = buffers[0].dtype, buffers[0].device
            self.is_initialized = True
            self.keys = self.key_buffer[:, :, :length]
            self.values = self.value_buffer[:, :, :length]

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
                   **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            end = self.length + key_states.shape[-2]
            if end > self.key_buffer.shape[2]:
                raise RuntimeError(f"KV buffer of {self.key_buffer.shape[2]} slots cannot hold {end} tokens")
            self.key_buffer[:, :, self.length : end] = key_states
            self.value_buffer[:, :, self.length : end] = value_states
            self.length = end
            self.keys = self.key_buffer[:, :, :end]
            self.values = self.value_buffer[:, :, :end]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.prompt_keys.shape[2] + self.length

        def crop(self, tokens_to_remove: int) -> None:
            # only assisted / speculative decoding crops a cache; the rollout loop never does
            raise TypeError(f"GroupLayer: a rollout cache cannot be cropped "
                            f"(asked to remove {tokens_to_remove} tokens)")

    class GroupCache(Cache):
        def __init__(self, layers: list[GroupLayer], prompt_bias: torch.Tensor, group: torch.Tensor) -> None:
            super().__init__(layers=layers)
            self.prompt_bias = prompt_bias  # [groups, 1, 1, width]: 0 or -inf (padding)
            self.group = group  # the group of each row
            seen: dict[int, int] = {}
            ranks = []  # each row's rank within its group
            for g in group.tolist():
                ranks.append(seen.get(g, 0))
                seen[g] = ranks[-1] + 1
            self.slot = torch.tensor(ranks, device=group.device)
            self.slots = max(seen.values())
            # every group holds `slots` rows, consecutive and in group order: the queries are a view
            groups = prompt_bias.shape[0]
            self.dense = len(group) == groups * self.slots and group.tolist() == [
                g for g in range(groups) for _ in range(self.slots)]

        @classmethod
        def from_prompts(cls, cache: Any, prompt_mask: torch.Tensor, groups: Sequence[int],
                         capacity: int) -> GroupCache:
            group = torch.tensor(groups, device=prompt_mask.device)
            bias = torch.zeros(prompt_mask.shape, dtype=torch.float32, device=prompt_mask.device)
            bias = bias.masked_fill(prompt_mask == 0, float("-inf"))[:, None, None, :]
            layers = []
            for layer in cache.layers:
                keys, values = layer.keys.contiguous(), layer.values.contiguous()
                shape = (len(groups), keys.shape[1], capacity, keys.shape[3])
                layers.append(GroupLayer((keys, values), (keys.new_empty(shape), values.new_empty(shape))))
            return cls(layers, bias, group)

        def selected(self, rows: Sequence[int]) -> GroupCache:
            layers = [GroupLayer((layer.prompt_keys, layer.prompt_values), buffers_of_rows(layer, rows),
                                 layer.length) for layer in self.layers]
            return GroupCache(layers, self.prompt_bias, self.group[list(rows)])

        def row_states(self, layer: GroupLayer, row: int) -> tuple[torch.Tensor, torch.Tensor]:
            """Row `row`'s keys and values ``[kv_heads, prompt columns + generated, dim]``."""
            g = int(self.group[row])
            return (torch.cat([layer.prompt_keys[g], layer.key_buffer[row, :, : layer.length]], dim=1),
                    torch.cat([layer.prompt_values[g], layer.value_buffer[row, :, : layer.length]], dim=1))

    return GroupCache
