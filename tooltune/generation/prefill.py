"""Prefilling the distinct prompts of a rollout call: one padded batch, or one prompt at a time.

A padded batch needs an attention mask, and with a mask torch's CPU attention takes its math path, which
holds every head's T x T scores of a layer (about 0.6 GB at 4 prompts of 2,000 tokens, float32) and runs
slower than the fused kernel it takes for one unpadded causal sequence. On the CPU a call whose prompts
differ in length is therefore prefilled one prompt at a time (`PREFILL` "auto"); the keys land in the
same right-aligned layout the padded batch gives, so the decode loop cannot tell the two apart. On an
accelerator the padded batch stays (its attention kernels take masks). Measured in docs/BENCHMARKS.md
("Prefilling one prompt at a time"; `bench/prefill.py`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tooltune.generation.rollout_cache import slot_cache_class

if TYPE_CHECKING:
    import torch

PREFILL = ("auto", "batch", "each")


def keep_last(model: Any) -> dict[str, int]:
    """``logits_to_keep=1`` where the model's forward takes it."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(base.forward).parameters else {}


def check_prefill(setting: str) -> str:
    """`setting` when it is one of `PREFILL`; ValueError naming the choices otherwise."""
    if setting not in PREFILL:
        raise ValueError(f"prefill must be one of {', '.join(PREFILL)}, got {setting!r}")
    return setting


def one_at_a_time(setting: str, device: torch.device, prompts: Sequence[Sequence[int]]) -> bool:
    """Whether `prompts` are prefilled one at a time under `setting` ("auto" | "batch" | "each"): "auto"
    does so on the CPU when they differ in length (a padded batch would need a mask)."""
    if check_prefill(setting) != "auto":
        return setting == "each"
    return device.type == "cpu" and len({len(p) for p in prompts}) > 1


def prefill_each(model: Any, prompts: Sequence[Sequence[int]], room: int, device: torch.device
                 ) -> tuple[Any, torch.Tensor]:
    """A `SlotCache` of `prompts`, each run alone on `device` (no padding, no mask), its keys right-aligned
    in buffers of max(len) + `room` slots (the padded batch's layout; the padding slots hold zeros and stay
    masked), and the last position's logits of each prompt, ``[rows, vocab]`` in float32."""
    import torch  # deferred: torch is heavy

    width, keep = max(len(p) for p in prompts), keep_last(model)
    layers = model.config.get_text_config(decoder=True).num_hidden_layers
    slot_cache = slot_cache_class()
    buffers: list[tuple[torch.Tensor, torch.Tensor]] = []
    logits = []
    for i, p in enumerate(prompts):
        one = slot_cache.allocate(len(p), None, layers)
        out = model(input_ids=torch.tensor([list(p)], device=device),
                    position_ids=torch.arange(len(p), device=device)[None], past_key_values=one,
                    use_cache=True, **keep)
        logits.append(out.logits[:, -1].float())
        if not buffers:  # shaped after the states the model computed (dtype, heads, head size)
            buffers = [tuple(t.new_zeros((len(prompts), t.shape[1], width + room, t.shape[3]))
                             for t in (layer.keys, layer.values)) for layer in one.layers]
        for (keys, values), layer in zip(buffers, one.layers, strict=True):
            keys[i, :, width - len(p) : width] = layer.keys[0]
            values[i, :, width - len(p) : width] = layer.values[0]
        del one, out  # the next prompt reuses this prompt's memory
    return slot_cache.filled(buffers, width), torch.cat(logits)
