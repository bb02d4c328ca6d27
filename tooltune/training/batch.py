"""Row selection on TRL's GRPO batch dict (the tensors `_compute_loss` reads), engine-specific glue.

TRL 1.16's `_generate_and_score_completions` returns per-row tensors ([B] or [B, T]) plus scalars
(`num_items_in_batch`); keeping rows means indexing every per-row entry the same way, and the
completion-width tensors can then lose the padding columns no kept row uses.
"""

from __future__ import annotations

import math
from typing import Any

import torch

# Per-row tensors whose second dimension is the completion length (trimmed after dropping rows).
COMPLETION_KEYS = (
    "completion_ids",
    "completion_mask",
    "old_per_token_logps",
    "sampling_per_token_logps",
    "ref_per_token_logps",
    "tool_mask",
    "tt_region",
    "importance_sampling_ratio",  # token-level [B, T]; the sequence-level [B, 1] is never wider
)


def loss_mask(batch: dict[str, Any]) -> torch.Tensor:
    """[B, T] mask of the completion tokens that enter the loss: TRL's completion mask, times its tool
    mask when a multi-turn rollout wrote one (tool output is not trained on)."""
    mask = batch["completion_mask"]
    return mask if "tool_mask" not in batch else mask * batch["tool_mask"]


def padding_rows(keep: list[int], rows: int, chunks: int) -> list[int]:
    """Dropped rows to add (loss mask zeroed) so the kept rows split into `chunks` equal micro-batches.

    TRL's `split_tensor_dict` cuts the batch into `steps_per_generation` equal slices and silently
    drops a remainder; uneven drops (zero-variance groups) are padded instead, at no loss contribution.
    """
    if keep and len(keep) % chunks == 0:
        return []
    need = max(chunks, math.ceil(len(keep) / chunks) * chunks) - len(keep)
    kept = set(keep)
    return [i for i in range(rows) if i not in kept][:need]


def select_rows(batch: dict[str, Any], index: list[int], rows: int) -> dict[str, Any]:
    """A new batch dict with rows `index` of every per-row tensor or list; scalars are shared."""
    first = next(v for v in batch.values() if isinstance(v, torch.Tensor))
    idx = torch.tensor(index, dtype=torch.long, device=first.device)
    out: dict[str, Any] = {}
    for key, val in batch.items():
        if isinstance(val, torch.Tensor) and val.dim() > 0 and val.size(0) == rows:
            out[key] = val.index_select(0, idx)
        elif isinstance(val, list) and len(val) == rows:
            out[key] = [val[i] for i in index]
        else:
            out[key] = val
    return out


def trim_padding(batch: dict[str, Any]) -> None:
    """Cut padding columns no kept row needs (tokens saved by down-sampling are really saved)."""
    width = (
        int(batch["completion_mask"].sum(dim=0).nonzero().max().item()) + 1
        if batch["completion_mask"].any()
        else 1
    )
    for key in COMPLETION_KEYS:
        val = batch.get(key)
        if isinstance(val, torch.Tensor) and val.dim() == 2 and val.size(1) > width:
            batch[key] = val[:, :width]
    if "token_type_ids" not in batch and "mm_token_type_ids" not in batch:
        used = batch["prompt_mask"].sum(dim=0).nonzero()
        start = int(used.min().item()) if used.numel() else 0
        batch["prompt_ids"] = batch["prompt_ids"][:, start:]
        batch["prompt_mask"] = batch["prompt_mask"][:, start:]
