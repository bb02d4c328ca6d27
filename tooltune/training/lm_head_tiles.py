"""TRL's fused LM head in small tiles over the scored positions only, for models on the CPU.

TRL's GRPOTrainer (1.16) patches the policy (and reference) model with `trl.trainer.utils.add_fused_lm_head`:
`model(..., labels=, fused_lm_head=True)` returns per-token log-probs and entropies from
`trl.kernels.ChunkedLogProbFunction`, which projects the hidden states through the LM head in
[tokens, vocabulary] tiles and never holds the whole [N, V] logits. Its tile is 4,096 tokens by 32,768
vocabulary columns, and where Triton is missing (the CPU) the head scores every position of the batch,
prompt positions included, and folds each tile with whole-tile torch ops: one tile is 0.5 GB of
float32 there, and the fold and the backward pass make several more of that size at once.

`tile_fused_lm_head` re-patches such a model's forward with the same computation, in the same autograd
function and under the model's own signature, with two changes: only the positions whose label is not
-100 reach the head (what TRL does on Triton devices), and they reach it `tokens` at a time against
`VOCAB_TILE` columns, so that a tile is tens of MB. The log-probs, entropies and gradients are TRL's up
to float rounding (the online log-sum-exp folds the vocabulary in other chunks);
`tests/test_training_lm_head_tiles.py` compares them. A call without ``fused_lm_head`` goes to TRL's
forward unchanged (generation, evaluation). Measured in docs/BENCHMARKS.md ("The fused LM head in
small tiles").

The re-patch is not applied, and the reason is returned, where TRL's head does more than a plain
projection this one reproduces: a scaled or soft-capped LM head, an MoE model that returns router
logits, or a forward that is not TRL's fused one.
"""

from __future__ import annotations

import functools
import inspect
import types
from contextlib import nullcontext
from typing import Any

import torch
from trl.kernels import ChunkedLogProbFunction
from trl.trainer.utils import FusedCausalLMOutput

VOCAB_TILE = 8192
"""Vocabulary columns of a tile: 1,024 tokens x 8,192 columns of float32 is 32 MB."""

_SCALED_HEAD = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier",
                "logits_scaling")


def unsupported_reason(model: Any) -> str | None:
    """Why `model`'s fused head stays TRL's, or None when `tile_fused_lm_head` can replace it."""
    forward = getattr(model, "forward", None)  # TRL's keeps the model's name and __wrapped__: read its own
    if forward is None or "fused_lm_head" not in inspect.signature(forward, follow_wrapped=False).parameters:
        return "the model has no fused LM head (TRL's add_fused_lm_head was not applied)"
    config = model.config.get_text_config()
    scaled = [name for name in _SCALED_HEAD if getattr(config, name, None) is not None]
    if scaled:
        return f"the model's LM head is scaled or soft-capped ({', '.join(scaled)})"
    if getattr(config, "output_router_logits", False):
        return "the model returns MoE router logits"
    if model.get_output_embeddings() is None:
        return "the model has no output embeddings"
    return None


def tile_fused_lm_head(
    model: Any,
    *,
    tokens: int,
    temperature: float,
    cast_to_fp32: bool = False,
    outputs: tuple[str, ...] = ("log_probs",),
) -> str | None:
    """Replace TRL's fused-head forward of `model` (the transformers model TRL patched, on the CPU) by the
    tiled one: at most `tokens` scored positions per tile. `temperature`, `cast_to_fp32` and `outputs` are
    what the trainer handed TRL's `add_fused_lm_head` (GRPOTrainer: its temperature,
    ``args.cast_lm_head_to_fp32``, ("log_probs", "entropy") for the policy and ("log_probs",) for the
    reference). Returns None once replaced, else why not (the model is left as it was)."""
    if tokens < 1:
        raise ValueError(f"tokens: at least 1 position per tile, got {tokens}")
    why = unsupported_reason(model)
    if why is not None:
        return why
    trl_forward = model.forward

    # the model's own signature, as TRL's forward shows it: callers read it (`logits_to_keep` in generation)
    @functools.wraps(type(model).forward)
    def forward(self: Any, *args: Any, fused_lm_head: bool = False, labels: Any = None,
                shift_labels: Any = None, num_items_in_batch: Any = None, **kwargs: Any) -> Any:
        if not fused_lm_head:
            return trl_forward(*args, labels=labels, shift_labels=shift_labels,
                               num_items_in_batch=num_items_in_batch, **kwargs)
        return tiled_head_forward(self, args, kwargs, labels, shift_labels, num_items_in_batch,
                                  tokens=tokens, temperature=temperature, cast_to_fp32=cast_to_fp32,
                                  outputs=outputs)

    model.forward = types.MethodType(forward, model)
    return None


def tiled_head_forward(
    model: Any,
    args: tuple,
    kwargs: dict[str, Any],
    labels: torch.Tensor | None,
    shift_labels: torch.Tensor | None,
    num_items_in_batch: Any,
    *,
    tokens: int,
    temperature: float,
    cast_to_fp32: bool,
    outputs: tuple[str, ...],
) -> Any:
    """TRL's fused-head forward (`add_fused_lm_head`'s, for a plain LM head) with the scored positions
    projected `tokens` at a time."""
    kwargs["use_cache"] = False
    hidden = model.base_model(*args, **kwargs).last_hidden_state
    if shift_labels is None:
        hidden, labels = hidden[:, :-1], labels[:, 1:]
    else:
        labels = shift_labels
    head = model.get_output_embeddings()
    labels = labels.to(head.weight.device)
    mask = labels != -100
    scored = hidden.to(head.weight.device)[mask]
    targets = labels[mask]
    context = nullcontext()
    if cast_to_fp32:
        scored = scored.float()
        context = torch.autocast(scored.device.type, enabled=False)
    pieces = []
    with context:
        # an empty batch still goes through once: its zeros stay connected to the model, as in TRL
        for start in range(0, max(1, targets.numel()), tokens):
            end = start + tokens
            pieces.append(ChunkedLogProbFunction.apply(
                scored[start:end], head.weight, head.bias, targets[start:end], temperature, VOCAB_TILE,
                None, 1.0, outputs,
            ))
    fields = [None if piece[0] is None else torch.cat(piece) for piece in zip(*pieces, strict=True)]
    log_probs, entropy, log_sum_sq_probs, mean_logits, is_top1 = (
        None if x is None else x.new_zeros(mask.shape).masked_scatter(mask, x) for x in fields
    )
    count = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
    return FusedCausalLMOutput(
        loss=-log_probs.sum() / count, log_probs=log_probs, entropy=entropy,
        log_sum_sq_probs=log_sum_sq_probs, mean_logits=mean_logits, is_top1=is_top1, label_mask=mask,
        aux_loss=None,
    )
