"""Per-token log-probs of GRPO completions with each group packed into one row of one ordinary forward.

A group's rows share a prompt. The packed path lays a group out as one sequence

    [prompt columns 0..P-2] [p_{P-1}, completion_1] [p_{P-1}, completion_2] ... [p_{P-1}, completion_k]

and runs all groups of a chunk in one forward (one row per group) with

- position ids: 0..P-2 on the prompt, P-1..P+C-1 in every segment, the column indices of the concatenated
  row `cat(prompt, completion)` that the ordinary path uses (transformers' default position ids);
- an attention pattern where a position sees the valid (mask 1) prompt columns before it and the valid
  earlier positions of its own segment only: every completion sees the whole prompt and its own past,
  never another completion.

Each segment starts with the last prompt column, so that the position predicting a completion's first
token belongs to that completion's segment (one label per position, as TRL's fused head needs); all
other prompt columns run once per group. A query sees exactly the keys it sees on the ordinary path,
with the same positions, so log-probs, entropies and gradients equal the ordinary path's up to float
rounding, for any padding (left-padded prompts, right-padded completions, masked tokens inside).

Nothing crosses the forward: no KV cache, no second pass before backward. So every decoder layer can be
checkpointed (`gradient_checkpointing` recomputes a layer from its saved inputs, the pattern included),
and DDP (static graph too), FSDP and DeepSpeed see one plain forward and backward.

The pattern reaches the layers through the model's own arguments: transformers' mask builder
(`masking_utils.create_causal_mask`) hands a prepared 4D mask to the layers unchanged, and the attention
function the model runs (its `config._attn_implementation`, looked up in transformers'
`AttentionInterface`) applies it:

- `tooltune_packed` (`tooltune.training.shared_prefix.packed_attention`, what the trainer switches an sdpa
  model to):
  the blocks of the pattern as sdpa calls, computing only the pairs it allows; it gets them through the
  `tt_packed` keyword, which transformers passes from the model's forward to every attention call, and a
  placeholder mask;
- `sdpa`: a boolean [G, 1, L, L] mask (True = attend); torch's kernels take an arbitrary mask, with no
  skipping of masked blocks (every one of the L^2 pairs is computed);
- `eager`: the same as an additive float mask (0 or the dtype's minimum);
- `flex_attention`: a `BlockMask` over the same rule; blocks that are entirely masked are skipped, so the
  cost follows the pairs a completion needs (its own segment and the prompt), not L^2.

Flash-attention kernels take no arbitrary mask; models running them, sliding-window, linear or hybrid
attention (whose layers would get the full-attention pattern) and stateful models (whose state would run
from one completion into the next) are refused with a reason (`support.model_problem`). On CPU,
`tooltune_packed` was 1.4-1.9x faster than the dense sdpa mask (docs/BENCHMARKS.md); flex_attention has
no backward on CPU, and none of the three has been timed on a GPU yet (`tooltune bench gpu` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from tooltune.training.shared_prefix.packed_attention import NAME as PACKED_ATTENTION
from tooltune.training.shared_prefix.packed_attention import packed_blocks
from tooltune.training.shared_prefix.support import (
    attention_implementation,
    base_model,
    completion_labels,
    first_rows,
    token_logps,
)


@dataclass
class PackedRows:
    """A chunk of rows laid out one group per row (see the module docstring)."""

    input_ids: torch.Tensor
    """[G, L] tokens: L = (P - 1) + k (C + 1), k the largest group's row count (smaller groups get empty
    segments whose tokens are all masked)."""
    position_ids: torch.Tensor
    """[G, L] the column each token has in the ordinary path's row."""
    valid: torch.Tensor
    """[G, L] bool: the token may be attended to (its prompt or completion mask is 1)."""
    segment: torch.Tensor
    """[L] 0 on the shared prompt columns, s + 1 on segment s."""
    slot: torch.Tensor
    """[B] segment of each input row, flattened: group * k + segment."""
    score_columns: torch.Tensor
    """[k C] packed columns whose outputs predict completion tokens 0..C-1 of segments 0..k-1."""
    segments: int
    """k: segments per packed row."""
    segment_length: int
    """S = C + 1: positions per segment."""


def pack_rows(
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    groups: torch.Tensor,
) -> PackedRows:
    """Lay out rows (`groups`: 0..G-1 per row, rows sharing a prompt share a group) one group per row."""
    rows, p = prompt_ids.shape
    c = completion_ids.size(1)
    device = prompt_ids.device
    n_groups = int(groups.max()) + 1
    counts = torch.bincount(groups, minlength=n_groups)
    k = int(counts.max())
    order = torch.sort(groups, stable=True).indices
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(groups)
    rank[order] = torch.arange(rows, device=device) - starts[groups[order]]
    slot = groups * k + rank

    firsts = first_rows(groups)
    seg_ids = prompt_ids.new_zeros((n_groups * k, c + 1))
    seg_valid = torch.zeros((n_groups * k, c + 1), dtype=torch.bool, device=device)
    seg_ids[slot] = torch.cat([prompt_ids[:, -1:], completion_ids], dim=1)
    seg_valid[slot] = torch.cat([prompt_mask[:, -1:], completion_mask], dim=1).bool()
    input_ids = torch.cat([prompt_ids[firsts, :-1], seg_ids.view(n_groups, -1)], dim=1)
    valid = torch.cat([prompt_mask[firsts, :-1].bool(), seg_valid.view(n_groups, -1)], dim=1)

    columns = torch.arange(p + c, device=device)
    positions = torch.cat([columns[: p - 1], columns[p - 1 :].repeat(k)])
    segment = torch.cat(
        [
            torch.zeros(p - 1, dtype=torch.long, device=device),
            torch.arange(1, k + 1, device=device).repeat_interleave(c + 1),
        ]
    )
    score = (p - 1) + (torch.arange(k, device=device) * (c + 1))[:, None] + torch.arange(c, device=device)
    return PackedRows(
        input_ids=input_ids,
        position_ids=positions.expand(n_groups, -1),
        valid=valid,
        segment=segment,
        slot=slot,
        score_columns=score.reshape(-1),
        segments=k,
        segment_length=c + 1,
    )


def allowed(packed: PackedRows) -> torch.Tensor:
    """[G, 1, L, L] bool: query q may attend to key j (causal, j on the prompt or in q's segment, j valid)."""
    seg = packed.segment
    length = seg.numel()
    idx = torch.arange(length, device=seg.device)
    pattern = (idx[None, :] <= idx[:, None]) & ((seg[None, :] == 0) | (seg[None, :] == seg[:, None]))
    return pattern[None, None] & packed.valid[:, None, None, :]


def attention_inputs(packed: PackedRows, kind: str, dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """The model keywords that carry the pattern to the attention implementation `kind` (see the module
    docstring): `tooltune_packed` gets its blocks (and a placeholder 4D mask that transformers' mask builder
    passes through without building one), the others a mask."""
    if kind == PACKED_ATTENTION:
        groups, length = packed.input_ids.shape
        k, s = packed.segments, packed.segment_length
        placeholder = torch.ones((1, 1, 1, 1), dtype=torch.bool, device=packed.valid.device)
        return {
            "attention_mask": placeholder.expand(groups, 1, length, length),
            "tt_packed": packed_blocks(packed.valid, length - k * s, k, s),
        }
    return {"attention_mask": attention_mask(packed, kind, dtype)}


def attention_mask(packed: PackedRows, kind: str, dtype: torch.dtype = torch.float32) -> Any:
    """The pattern as a mask of the attention implementation `kind`: a `BlockMask` for flex_attention, an
    additive float mask for eager, a boolean mask (True = attend) otherwise."""
    if kind == "flex_attention":
        from torch.nn.attention.flex_attention import create_block_mask  # deferred: flex is optional

        seg, valid = packed.segment, packed.valid

        def mask_mod(b: Any, h: Any, q: Any, kv: Any) -> Any:
            return (kv <= q) & ((seg[kv] == 0) | (seg[kv] == seg[q])) & valid[b, kv]

        length = seg.numel()
        return create_block_mask(mask_mod, packed.valid.size(0), None, length, length, device=seg.device)
    mask = allowed(packed)
    if kind == "eager":
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            ~mask, torch.finfo(dtype).min
        )
    return mask


def _model_dtype(model: Any) -> torch.dtype:
    embeddings = base_model(model).get_input_embeddings()
    return embeddings.weight.dtype if embeddings is not None else torch.float32


def packed_chunk(
    model: Any,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    groups: torch.Tensor,
    temperature: float,
    return_entropy: bool,
    fused_lm_head: bool,
) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    """Log-probs [B, C] (zero at padding), entropies and the number of groups, from one packed forward."""
    packed = pack_rows(prompt_ids, prompt_mask, completion_ids, completion_mask, groups)
    n_groups, k, c = packed.input_ids.size(0), packed.segments, completion_ids.size(1)
    kwargs = {
        "input_ids": packed.input_ids,
        "position_ids": packed.position_ids,
        "use_cache": False,
        **attention_inputs(packed, attention_implementation(model), _model_dtype(model)),
    }
    if fused_lm_head:
        labels = completion_labels(completion_ids, completion_mask)
        seg_labels = labels.new_full((n_groups * k, c + 1), -100)
        seg_labels[packed.slot, :c] = labels
        prefix = labels.new_full((n_groups, packed.input_ids.size(1) - k * (c + 1)), -100)
        shift_labels = torch.cat([prefix, seg_labels.view(n_groups, -1)], dim=1)
        out = model(**kwargs, shift_labels=shift_labels, fused_lm_head=True)

        def rows(values: torch.Tensor) -> torch.Tensor:
            return values[:, packed.score_columns].reshape(n_groups * k, c)[packed.slot]

        logps = rows(out.log_probs)
        entropy = rows(out.entropy) if return_entropy and out.entropy is not None else None
        return logps, entropy, n_groups
    logits = model(**kwargs, logits_to_keep=packed.score_columns).logits
    logits = logits.reshape(n_groups * k, c, -1)[packed.slot]
    logps, entropy = token_logps(logits, completion_ids, completion_mask, temperature, return_entropy)
    return logps, entropy, n_groups
