"""Per-token log-probabilities of GRPO completions with each distinct prompt run through the model once.

The n rollouts of a GRPO group share one prompt (1-4k tokens of tool schemas and history) and differ in
a short completion. The ordinary computation runs `model(cat(prompt, completion))` for every row, so
each prompt is processed n times, forward and backward. `grouped_logps` instead

1. finds the distinct prompts of the batch by content (rows may come in any order: TRL shuffles the
   rows of a generation batch before the policy update);
2. runs the distinct prompts, all but their last column, once with a `DynamicCache` and with gradients;
3. repeats each layer's cached keys/values to the rows that share the prompt
   (`DynamicCache.batch_select_indices`, an indexing op autograd differentiates through, so the
   gradients of all n completions flow back into the one prompt pass);
4. runs `[last prompt column, completion]` of every row on that cache, with the attention mask of the
   whole concatenated sequence and its column indices as position ids.

Step 4 starts at the last prompt column so that its output, which predicts the first completion token,
comes from the same pass as the others: the completion pass yields exactly the C positions the
ordinary path scores. Mask and positions are those of the concatenated row (positions are column
indices, which is what a transformers causal LM uses when called without position ids, as TRL calls
it), so the split is exact for any padding: left-padded prompts, right-padded completions, or other.

Two heads: the model's own logits (`log_softmax(logits / temperature)` gathered at the completion
tokens, entropy from the same distribution), or TRL's fused LM head (`fused_lm_head=True`: the model
was patched by `trl.trainer.utils.add_fused_lm_head`, which holds its own temperature). Either way the
values at completion padding (`completion_mask == 0`) are zero, as TRL's fused head returns them.

Where sharing cannot work the ordinary path runs and the reason is logged once per process: no prompt
occurs twice, a prompt of fewer than 2 columns, cache layers other than plain `DynamicLayer` (sliding
window, linear or hybrid attention), gradient checkpointing active in training mode (transformers then
drops the cache inside checkpointed layers), an encoder-decoder model, a prompt-learning PEFT adapter
(it adds virtual tokens), a model class without a standard KV cache, or a model that did not fill the
cache as expected (checked after each pass); the rules are `support.call_problem`'s.
`PrefixLogps.fallback` carries the reason, None when the prompts were shared.

`grouped_logps(..., path="packed")` shares the prompts the other way: each group packed into one row of
one ordinary forward with an attention pattern that keeps the completions apart
(`tooltune.training.shared_prefix.packed`); no cache crosses the forward, so it runs under gradient
checkpointing and inside FSDP / DeepSpeed wrappers.

`shuffle_groups` is TRL's row shuffle of a generation batch with each prompt's rows kept adjacent, so
that the micro-batches of gradient accumulation hold whole groups to share.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from tooltune.training.shared_prefix.packed import packed_chunk
from tooltune.training.shared_prefix.support import (
    PATHS,
    base_model,
    call_problem,
    completion_labels,
    first_rows,
    token_logps,
)

logger = logging.getLogger(__name__)

_LOGGED: set[str] = set()

NO_REPEAT = "no prompt occurs twice in the batch"


@dataclass
class PrefixLogps:
    """Result of `grouped_logps`."""

    logps: torch.Tensor
    """[B, C] log-probabilities of the completion tokens, zero where `completion_mask` is 0."""
    entropy: torch.Tensor | None
    """[B, C] entropy of each next-token distribution (zero at padding), when asked for."""
    prompt_rows: int
    """Prompt rows run through the model: the distinct prompts (per chunk), or B on the ordinary path."""
    fallback: str | None
    """Why the ordinary path ran (for at least one chunk), None when every chunk shared its prompts."""


def _log_once(reason: str, level: int = logging.WARNING) -> None:
    if reason not in _LOGGED:
        _LOGGED.add(reason)
        logger.log(level, "shared-prefix log-probs: %s; computing the ordinary way", reason)


def prompt_groups(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> torch.Tensor:
    """Group index (0..G-1) of each row: rows with the same mask and the same tokens under it share one."""
    key = torch.cat([prompt_ids.masked_fill(prompt_mask == 0, 0), prompt_mask.to(prompt_ids.dtype)], dim=1)
    _, inverse = torch.unique(key, dim=0, return_inverse=True)
    return inverse


def group_permutation(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> torch.Tensor:
    """A random row order (CPU) with the groups in random order and each group's rows adjacent."""
    groups = prompt_groups(prompt_ids, prompt_mask).cpu()
    rows = torch.randperm(groups.numel())  # random order inside each group
    position = torch.randperm(int(groups.max()) + 1)[groups]  # random place of each group
    return rows[torch.sort(position[rows], stable=True).indices]


def shuffle_groups(batch: dict[str, Any]) -> dict[str, Any]:
    """TRL's `shuffle_sequence_dict` for a GRPO batch dict, keeping the rows of each prompt adjacent.

    Every per-row entry (tensor with a first dimension, or list) is permuted in unison; 0-d tensors and
    None pass through. Equal micro-batches cut from the result (TRL's `split_tensor_dict`) then hold
    whole groups, except where a cut falls inside one, so `grouped_logps` shares their prompts.
    """
    order = group_permutation(batch["prompt_ids"], batch["prompt_mask"])

    def permute(value: Any) -> Any:
        if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0):
            return value
        if isinstance(value, torch.Tensor):
            return value[order.to(value.device)]
        return [value[i] for i in order.tolist()]

    return {key: permute(value) for key, value in batch.items()}


def ordinary_logps(
    model: Any,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float = 1.0,
    return_entropy: bool = False,
    fused_lm_head: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The reference computation: one forward of `cat(prompt, completion)` per row (as TRL runs it)."""
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    c = completion_ids.size(1)
    if fused_lm_head:
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-c] = -100
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        entropy = out.entropy[:, -c:] if return_entropy and out.entropy is not None else None
        return out.log_probs[:, -c:], entropy
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=c + 1).logits[:, :-1]
    return token_logps(logits, completion_ids, completion_mask, temperature, return_entropy)


def _shared_chunk(
    model: Any,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    groups: torch.Tensor,
    temperature: float,
    return_entropy: bool,
    fused_lm_head: bool,
) -> tuple[torch.Tensor, torch.Tensor | None, int] | str:
    """Shared-prompt log-probs of one chunk (`groups`: 0..G-1 per row), or the reason it cannot be done."""
    rows, p = prompt_ids.shape
    c = completion_ids.size(1)
    firsts = first_rows(groups)
    n_groups = firsts.numel()
    columns = torch.arange(p + c, device=prompt_ids.device)

    cache = DynamicCache(config=base_model(model).config)
    model(
        input_ids=prompt_ids[firsts, :-1],
        attention_mask=prompt_mask[firsts, :-1],
        position_ids=columns[: p - 1].expand(n_groups, -1),
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    if cache.get_seq_length() != p - 1:
        return f"the prompt pass left {cache.get_seq_length()} cached positions, expected {p - 1}"
    cache.batch_select_indices(groups)

    suffix = torch.cat([prompt_ids[:, -1:], completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    kwargs = {
        "input_ids": suffix,
        "attention_mask": mask,
        "position_ids": columns[p - 1 :].expand(rows, -1),
        "past_key_values": cache,
    }
    if fused_lm_head:
        ignore = completion_ids.new_full((rows, 1), -100)
        labels = torch.cat([ignore, completion_labels(completion_ids, completion_mask)], dim=1)
        out = model(**kwargs, labels=labels, fused_lm_head=True)
        logps = out.log_probs
        entropy = out.entropy if return_entropy else None
    else:
        logits = model(**kwargs, use_cache=True).logits[:, :-1]
        logps, entropy = token_logps(logits, completion_ids, completion_mask, temperature, return_entropy)
    if cache.get_seq_length() != p + c:
        return f"the completion pass left {cache.get_seq_length()} cached positions, expected {p + c}"
    return logps, entropy, n_groups


def grouped_logps(
    model: Any,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float = 1.0,
    return_entropy: bool = False,
    fused_lm_head: bool = False,
    batch_size: int | None = None,
    path: str = "kv_cache",
) -> PrefixLogps:
    """Per-token log-probs of the completions, running each distinct prompt once per chunk.

    Args:
        model: a transformers causal LM taking `past_key_values`, or a PEFT model or a
            DistributedDataParallel wrapper around one (both passes go through the wrapper's forward;
            DDP's default and `find_unused_parameters=True` reduce the right gradients, `static_graph`
            does not support two forwards before one backward).
        prompt_ids, prompt_mask: [B, P] prompts as TRL pads them (left); rows sharing a prompt need not
            be adjacent.
        completion_ids, completion_mask: [B, C] completions (right-padded).
        temperature: logits are divided by it (the model's own head; the fused head has its own).
        return_entropy: also return the per-token entropy.
        fused_lm_head: score with TRL's fused LM head (`model(..., labels=, fused_lm_head=True)`).
        batch_size: at most this many rows per forward (TRL's memory chunking); rows are ordered by prompt
            first, so a chunk holds whole groups when `batch_size` is a multiple of the group size.
        path: "kv_cache" (the prompts' cache reused by the completions: two model calls per chunk) or
            "packed" (one model call per chunk with each group packed into one row; runs under gradient
            checkpointing and sharded wrappers too).

    Returns:
        `PrefixLogps` with `logps` [B, C] equal to `ordinary_logps` up to float rounding, and the same
        gradients.
    """
    if path not in PATHS:
        raise ValueError(f"path: one of {PATHS}, got {path!r}")
    rows = prompt_ids.size(0)
    problem = call_problem(model, prompt_ids.size(1), path) if rows > 1 else NO_REPEAT
    if problem is not None:
        _log_once(problem, logging.INFO if problem == NO_REPEAT else logging.WARNING)
        logps, entropy = ordinary_logps(
            model, prompt_ids, prompt_mask, completion_ids, completion_mask, temperature, return_entropy,
            fused_lm_head,
        )
        return PrefixLogps(logps, entropy, rows, problem)

    groups = prompt_groups(prompt_ids, prompt_mask)
    order = torch.sort(groups, stable=True).indices
    size = batch_size or rows
    parts_logps, parts_entropy, prompt_rows, fallback = [], [], 0, None
    for start in range(0, rows, size):
        idx = order[start : start + size]
        local = torch.unique_consecutive(groups[idx], return_inverse=True)[1]
        args = (prompt_ids[idx], prompt_mask[idx], completion_ids[idx], completion_mask[idx])
        result: tuple | str = NO_REPEAT
        if int(local.max()) + 1 < idx.numel():
            chunk = packed_chunk if path == "packed" else _shared_chunk
            result = chunk(model, *args, local, temperature, return_entropy, fused_lm_head)
        if isinstance(result, str):
            _log_once(result, logging.INFO if result == NO_REPEAT else logging.WARNING)
            fallback = fallback or result
            logps, entropy = ordinary_logps(model, *args, temperature, return_entropy, fused_lm_head)
            used = idx.numel()
        else:
            logps, entropy, used = result
        parts_logps.append(logps)
        parts_entropy.append(entropy)
        prompt_rows += used
    back = torch.argsort(order)  # chunk order -> the caller's row order
    logps = torch.cat(parts_logps)[back]
    entropy = torch.cat(parts_entropy)[back] if return_entropy and parts_entropy[0] is not None else None
    return PrefixLogps(logps, entropy, prompt_rows, fallback)
