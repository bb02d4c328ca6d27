"""Rollouts that compute each prompt once: `sample(model, prompts, n, sampling)`.

The ``group_prefill`` path:

1. identical prompts of the call are computed once (TRL passes each prompt n times in a row);
2. the distinct prompts are prefilled in one left-padded batch (attention mask, position ids counted
   from the mask), or on the CPU one at a time into the same layout (`tooltune.generation.prefill`: no
   mask, so torch's fused attention instead of its math path), keeping only the last position's logits;
3. where a prompt has several rows, its keys and values are kept once for the group and each row gets a
   buffer sized for max_new_tokens for its own keys; the decode steps attend through
   `cascade_attention` (the group's prompt read once for all its rows and query heads, the rows' own
   keys apart, the two softmaxes combined exactly). Where the model's attention cannot be swapped
   (`cascade_attention.unsupported_reason`), the prompt's keys are copied to each row (a broadcast per run
   of copies) into buffers sized for prompt + max_new_tokens (`rollout_cache.slot_cache_class`). Either
   way a decode step writes one slot per layer instead of concatenating the cache;
4. one decode loop carries every row of the call (on CPU with grouped KV heads passed to torch's
   attention as they are, not repeated per query head): temperature, top-k and top-p as transformers
   applies them, a `torch.Generator` seeded from `Sampling.seed`; each sampled token's log-prob is the
   log-softmax of the temperature-scaled logits (as TRL scores it); a row finishes on a stop token, or
   when the caller's `StopCheck` says its tokens so far decide its outcome (evaluation: a format that no
   continuation can pass); a finished row writes padding, and once a quarter of the rows in the loop have
   finished they leave it (their cache rows dropped);
5. with a `PrefixCache`, a context that starts with a held sequence (an episode's previous turn)
   prefills only the tokens after the longest common prefix; every row's sequence is stored after the
   call for the next turn.

Why not what the engines already have (transformers 5.23, TRL 1.16):

- ``generate(num_return_sequences=n)`` expands the inputs before the prefill (every copy is prefilled)
  and grows a `DynamicCache` by ``torch.cat`` at every step;
- `DynamicCache.batch_repeat_interleave` repeats a prefilled cache, but the result still grows by
  concatenation, and ``generate`` cannot start from a cache of other rows than its inputs;
- `StaticCache` pre-sizes the buffers but attends over all of them (a masked tail) and is laid out for
  ``torch.compile``; its per-row copy is not exposed. The buffers here are the same idea, attended over
  the filled part only, which keeps the keys of a step identical to `DynamicCache`'s;
- continuous batching (``generate_batch``, TRL's ``use_transformers_continuous_batching``) shares
  prompt blocks in a paged cache, but needs the paged attention kernels of its scheduler, returns no
  log-probs to TRL and is reached only through its own request manager; it is not used here.

The ``generate`` path is transformers' ``generate`` (every prompt repeated n times, all prefilled),
forced by ``path="generate"`` or taken where the model has no standard KV cache (a stateful or
encoder-decoder model, sliding-window or linear-attention layers, a prompt-learning adapter). Which path
ran and why is in the returned `Rollouts` and logged once per reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import os
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tooltune.config import check_values, option
from tooltune.generation import cascade_attention
from tooltune.generation.prefill import keep_last, one_at_a_time, prefill_each
from tooltune.generation.rollout_cache import PrefixCache, slot_cache_class

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

PATHS = ("auto", "group_prefill", "generate")
_FORCE_GQA = "TRANSFORMERS_SDPA_FORCE_GQA"  # read by transformers' sdpa attention at every call
_logged: set[str] = set()

StopCheck = Callable[[int, list[int]], bool]
"""(row, the row's new tokens so far) -> True when the row may end here (group-prefill path)."""


@dataclass(frozen=True)
class Sampling:
    """How the tokens of a rollout are drawn (TRL's GRPO settings map onto these fields)."""

    max_new_tokens: int = dataclasses.field(
        metadata=option(1, "Most new tokens per completion.", min=1).metadata
    )
    temperature: float = option(0.0, "Temperature of the sampling distribution; 0 = greedy.", min=0)
    top_p: float = option(1.0, "Nucleus sampling: keep the most likely tokens up to this probability mass.",
                          min_exclusive=0, max=1)
    top_k: int = option(0, "Keep only the k most likely tokens; 0 = all.", min=0)
    seed: int | None = option(None, "Seed of the sampling generator; None = torch's global generator.")

    def __post_init__(self) -> None:
        check_values(self)


@dataclass
class Rollouts:
    """The completions of one `sample` call, prompt-major (prompt 0's n rows, then prompt 1's, ...)."""

    ids: list[list[int]]
    """New tokens per row, cut after the first stop token (kept)."""
    logprobs: list[list[float]]
    """Per token of `ids`: its log-softmax under the temperature-scaled logits (raw logits when greedy)."""
    path: str
    """"group_prefill" or "generate"."""
    reason: str
    """Why this path ran."""


def log_once(message: str, level: int = logging.INFO) -> None:
    """Log `message` the first time it is seen in this process."""
    if message not in _logged:
        _logged.add(message)
        logger.log(level, message)


def unsupported_reason(model: Any) -> str | None:
    """Why `model` cannot take the group-prefill path (no standard KV cache), or None when it can."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT model
    config = getattr(base, "config", None)
    peft = getattr(model, "active_peft_config", None)
    if peft is not None and getattr(peft, "is_prompt_learning", False):
        return "a prompt-learning adapter adds virtual tokens to every forward"
    if config is None or getattr(config, "is_encoder_decoder", False):
        return f"{type(base).__name__} is not a decoder-only model"
    if getattr(type(base), "_is_stateful", False):
        return f"{type(base).__name__} keeps a recurrent state, not a KV cache"
    if "past_key_values" not in inspect.signature(base.forward).parameters:
        return f"{type(base).__name__}.forward takes no past_key_values"
    from transformers.cache_utils import get_layer_types_and_kwargs  # deferred: transformers is heavy

    types = set(get_layer_types_and_kwargs(config.get_text_config(decoder=True))[0])
    if types - {"full_attention"}:
        return f"layer types {sorted(types)} (only full attention has a plain KV cache)"
    return None


def choose_path(model: Any, path: str = "auto") -> tuple[str, str]:
    """(path, why) for `model` under the setting `path` ("auto" | "group_prefill" | "generate")."""
    if path not in PATHS:
        raise ValueError(f"rollout path must be one of {PATHS}, got {path!r}")
    if path == "generate":
        return "generate", "the rollout path is set to generate"
    problem = unsupported_reason(model)
    if problem is None:
        return "group_prefill", "each distinct prompt prefilled once, its copies decoded on pre-sized buffers"
    if path == "group_prefill":
        raise ValueError(f"rollout path group_prefill cannot run: {problem}")
    return "generate", problem


def sample(
    model: Any,
    prompts: Sequence[Sequence[int]],
    n: int,
    sampling: Sampling,
    *,
    pad_id: int,
    stop_ids: Collection[int],
    path: str = "auto",
    prefix_cache: PrefixCache | None = None,
    stop: StopCheck | None = None,
    prefill: str = "auto",
) -> Rollouts:
    """n completions of each prompt (token ids), rows returned prompt-major. `stop_ids` end a row (the
    stop token is kept); `pad_id` fills finished rows. `path` forces a path (`choose_path`); `prefix_cache`
    (group-prefill path only) reuses and stores the keys of earlier sequences. `stop(row, tokens)` (row in
    the returned order) is asked after each token of an unfinished row and ends it when true, the tokens
    so far kept (group-prefill path only: ``generate`` runs every row to a stop token or the budget).
    `prefill` ("auto" | "batch" | "each", group-prefill path) runs the distinct prompts as one padded
    batch or one at a time (`tooltune.generation.prefill`; "auto": one at a time on the CPU when their
    lengths differ and no prefix is reused)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    empty = [i for i, p in enumerate(prompts) if len(p) == 0]
    if empty:
        raise ValueError(f"prompt {empty[0]} is empty: a completion needs at least one prompt token")
    if stop is not None and prefix_cache is not None:
        raise ValueError("stop and prefix_cache cannot be combined: a stopped row's sequence is not stored")
    chosen, why = choose_path(model, path)
    level = logging.INFO if chosen == "group_prefill" or path == "generate" else logging.WARNING
    log_once(f"rollouts on the {chosen} path: {why}", level)
    if not prompts:
        return Rollouts([], [], chosen, why)
    import torch  # deferred: torch is heavy

    was_training = getattr(model, "training", False)
    model.eval()  # no dropout while sampling
    try:
        with torch.inference_mode():
            if chosen == "generate":
                ids, logps = _generate(model, prompts, n, sampling, pad_id, stop_ids)
            else:
                with _grouped_kv_heads_on_cpu(_device(model)):
                    ids, logps = _group_prefill(model, prompts, n, sampling, pad_id, stop_ids, prefix_cache,
                                                stop, prefill)
    finally:
        if was_training:
            model.train()
    return Rollouts(ids, logps, chosen, why)


# --------------------------------------------------------------------------------------------
# group prefill


def _group_prefill(
    model: Any,
    prompts: Sequence[Sequence[int]],
    n: int,
    sampling: Sampling,
    pad_id: int,
    stop_ids: Collection[int],
    prefix_cache: PrefixCache | None,
    stop: StopCheck | None = None,
    prefill: str = "auto",
) -> tuple[list[list[int]], list[list[float]]]:
    import torch  # deferred: torch is heavy

    distinct: dict[tuple[int, ...], int] = {}
    for p in prompts:
        distinct.setdefault(tuple(p), len(distinct))
    order = list(distinct)
    device = _device(model)
    sources = [distinct[tuple(p)] for p in prompts for _ in range(n)]
    copies = sources != list(range(len(order)))
    problem = cascade_attention.unsupported_reason(model) if copies else "no prompt has several rows"
    if copies:
        log_once("rollouts: decode attention " + ("reads each group's prompt keys once (cascade)"
                 if problem is None else f"on per-row copies of the prompt keys: {problem}"))
    room = 0 if problem is None else sampling.max_new_tokens  # the group's rows get their own buffers
    cache, mask, positions, logits = _prefill(model, order, room, pad_id, prefix_cache, prefill)
    if copies:
        if problem is None:
            cache = cascade_attention.group_cache_class().from_prompts(cache, mask, sources,
                                                                       sampling.max_new_tokens)
        else:
            cache = cache.expanded(sources, cache.layers[0].capacity)
        rows = torch.tensor(sources, device=device)
        mask, positions, logits = mask[rows], positions[rows], logits[rows]
    width = cache.get_seq_length()
    mask = torch.cat([mask, mask.new_ones(len(sources), sampling.max_new_tokens)], dim=1)

    def retire(cache: Any, mask: torch.Tensor, in_cache: list[int], rows: list[int],
               tokens: torch.Tensor) -> None:
        """Put each row's prompt + completion (all but its last token: that one's keys were never
        computed) in `prefix_cache`, its keys gathered from the unmasked columns."""
        generated = torch.arange(width, mask.shape[1], device=mask.device)
        for i, row in zip(in_cache, rows, strict=True):
            completion = _cut(tokens[row].tolist(), stop_ids)
            columns = torch.cat([mask[i, :width].nonzero()[:, 0], generated[: len(completion) - 1]])
            prefix_cache.put(list(order[sources[row]]) + completion[:-1],
                             [tuple(t.index_select(1, columns) for t in cache.row_states(layer, i))
                              for layer in cache.layers])

    attention = cascade_attention.cascade_decoding(model) if problem is None else contextlib.nullcontext()
    with attention:
        new, logps, ends = _decode(model, cache, mask, positions, logits, sampling, pad_id, stop_ids,
                                   retire if prefix_cache is not None else None, stop)
    ids = [_cut(row[:end], stop_ids) for row, end in zip(new.tolist(), ends, strict=True)]
    return ids, [lp[: len(i)] for lp, i in zip(logps.tolist(), ids, strict=True)]


@contextlib.contextmanager
def _grouped_kv_heads_on_cpu(device: torch.device) -> Iterator[None]:
    """On CPU, let transformers' sdpa attention pass grouped KV heads to torch (``enable_gqa``) under an
    attention mask too. Without it a padded batch copies every layer's keys and values once per query
    head of a group at every decode step (``repeat_kv``): at 8 rows x 1100 keys and 9 / 3 heads, 40 ms
    per layer against 2.4 ms, with equal outputs. On CUDA transformers' own choice stays (its efficient
    kernels refuse ``enable_gqa`` with a mask)."""
    if device.type != "cpu" or _FORCE_GQA in os.environ:
        yield
        return
    os.environ[_FORCE_GQA] = "1"
    try:
        yield
    finally:
        os.environ.pop(_FORCE_GQA, None)


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device


def _prefill(
    model: Any,
    prompts: list[tuple[int, ...]],
    max_new: int,
    pad_id: int,
    prefix_cache: PrefixCache | None,
    prefill: str = "auto",
) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A `SlotCache` of the distinct prompts with room for `max_new` more tokens, their column mask,
    their next positions (real tokens so far) and the last position's logits.

    Columns: the reused prefixes of `prefix_cache` right-aligned in a first block, then the remaining
    tokens right-aligned in a second block; masked columns (padding) are attended by no row."""
    import torch  # deferred: torch is heavy

    device = _device(model)
    reused = [prefix_cache.longest_prefix(p) if prefix_cache is not None else (0, None) for p in prompts]
    # at least one token of each prompt runs: its logits start the decode
    reused = [(min(k, len(p) - 1), key) for (k, key), p in zip(reused, prompts, strict=True)]
    if prefix_cache is not None and any(k == 0 for k, _ in reused) and len(prefix_cache):
        log_once("rollouts: a context shares no prefix with the held sequences (a new conversation, or a "
                 "chat template that re-renders earlier turns): it is prefilled in full")
    held = max(k for k, _ in reused)
    fresh = max(len(p) - k for p, (k, _) in zip(prompts, reused, strict=True))
    mask = torch.zeros(len(prompts), held + fresh, dtype=torch.long, device=device)
    next_pos = torch.tensor([len(p) for p in prompts], device=device)
    if not held and one_at_a_time(prefill, device, prompts):
        for i, p in enumerate(prompts):
            mask[i, fresh - len(p) :] = 1
        cache, logits = prefill_each(model, prompts, max_new, device)
        return cache, mask, next_pos, logits
    ids = torch.full((len(prompts), fresh), pad_id, dtype=torch.long, device=device)
    pos = torch.ones(len(prompts), fresh, dtype=torch.long, device=device)
    prefixes = None
    for i, (p, (k, key)) in enumerate(zip(prompts, reused, strict=True)):
        if k:
            taken = prefix_cache.take(key, k)
            if prefixes is None:  # per layer [rows, heads, held, dim], zeros where a row holds less
                prefixes = [tuple(t.new_zeros((len(prompts), t.shape[0], held, t.shape[2])) for t in kv)
                            for kv in taken]
            for (keys, values), (k_held, v_held) in zip(prefixes, taken, strict=True):
                keys[i, :, held - k :] = k_held
                values[i, :, held - k :] = v_held
            mask[i, held - k : held] = 1
        rest = p[k:]
        ids[i, fresh - len(rest) :] = torch.tensor(rest, device=device)
        pos[i, fresh - len(rest) :] = torch.arange(k, len(p), device=device)
        mask[i, held + fresh - len(rest) :] = 1
    layers = model.config.get_text_config(decoder=True).num_hidden_layers
    cache = slot_cache_class().allocate(held + fresh + max_new, prefixes, layers)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True,
                **keep_last(model))
    return cache, mask, next_pos, out.logits[:, -1].float()


def _decode(
    model: Any,
    cache: Any,
    mask: torch.Tensor,
    positions: torch.Tensor,
    logits: torch.Tensor,
    sampling: Sampling,
    pad_id: int,
    stop_ids: Collection[int],
    retire: Callable[..., None] | None = None,
    stop: StopCheck | None = None,
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """The decode loop over every row at once: (new tokens, their log-probs), ``[rows, steps]``, and the
    tokens each row keeps (all its steps, except a row that `stop` ended: its tokens up to that point).

    Once a quarter of the rows in the loop have finished, the loop goes on without them (their cache rows
    are dropped: a copy of the others' filled slots, about one step of a concatenating cache), so that
    the long completions of a batch do not carry the finished ones. `retire(cache, mask, rows_in_cache,
    rows, tokens)` is called for the rows leaving the loop and, at the end, for the rows still in it."""
    import torch  # deferred: torch is heavy

    device, total = logits.device, logits.shape[0]
    generator = None
    if sampling.seed is not None and sampling.temperature > 0:
        generator = torch.Generator(device=device).manual_seed(sampling.seed)
    stops = torch.tensor(sorted(stop_ids), dtype=torch.long, device=device)
    tokens = torch.full((total, sampling.max_new_tokens), pad_id, dtype=torch.long, device=device)
    logps = torch.zeros(total, sampling.max_new_tokens, device=device)
    rows = torch.arange(total, device=device)  # the output row of each row of the loop
    done = torch.zeros(total, dtype=torch.bool, device=device)
    width, keep, steps = cache.get_seq_length(), keep_last(model), 0
    ends = [sampling.max_new_tokens] * total
    for step in range(sampling.max_new_tokens):
        token, logp = _pick(logits, sampling, generator)
        token = token.masked_fill(done, pad_id)
        tokens[rows, step], logps[rows, step] = token, logp.masked_fill(done, 0.0)
        done |= torch.isin(token, stops)
        if stop is not None:
            for i in (~done).nonzero()[:, 0].tolist():
                row = int(rows[i])
                if stop(row, tokens[row, : step + 1].tolist()):
                    done[i], ends[row] = True, step + 1
        steps = step + 1
        if steps == sampling.max_new_tokens or bool(done.all()):
            break
        finished = int(done.sum())
        if finished and 4 * finished >= len(done):
            going = (~done).nonzero()[:, 0]
            if retire is not None:
                gone = done.nonzero()[:, 0]
                retire(cache, mask, gone.tolist(), rows[gone].tolist(), tokens)
            cache = cache.selected(going.tolist())
            mask, positions, rows, token = mask[going], positions[going], rows[going], token[going]
            done = done[going]
        grouped = {"group_cache": cache} if hasattr(cache, "prompt_bias") else {}  # read by cascade attention
        out = model(input_ids=token[:, None], attention_mask=mask[:, : width + step + 1],
                    position_ids=(positions + step)[:, None], past_key_values=cache, use_cache=True,
                    **keep, **grouped)
        logits = out.logits[:, -1].float()
    if retire is not None:
        retire(cache, mask, list(range(len(rows))), rows.tolist(), tokens)
    return tokens[:, :steps], logps[:, :steps], [min(end, steps) for end in ends]


def _pick(logits: torch.Tensor, sampling: Sampling, generator: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(token, its log-prob) per row: argmax when greedy, else a draw after temperature, top-k, top-p
    (in transformers' order); the log-prob is of the temperature-scaled logits before the filters."""
    import torch  # deferred: torch is heavy

    if sampling.temperature == 0:
        token = logits.argmax(dim=-1)
        return token, torch.log_softmax(logits, dim=-1).gather(1, token[:, None])[:, 0]
    scaled = logits / sampling.temperature
    scores = scaled
    if 0 < sampling.top_k < scores.shape[-1]:
        kth = torch.topk(scores, sampling.top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if sampling.top_p < 1.0:
        ordered, index = torch.sort(scores, descending=False)
        drop = ordered.softmax(dim=-1).cumsum(dim=-1) <= 1 - sampling.top_p
        drop[:, -1] = False  # the most likely token always stays
        scores = scores.masked_fill(drop.scatter(1, index, drop), float("-inf"))
    token = torch.multinomial(scores.softmax(dim=-1), 1, generator=generator)[:, 0]
    return token, torch.log_softmax(scaled, dim=-1).gather(1, token[:, None])[:, 0]


def _cut(row: list[int], stop_ids: Collection[int]) -> list[int]:
    """`row` up to and including its first stop token."""
    for i, t in enumerate(row):
        if t in stop_ids:
            return row[: i + 1]
    return row


# --------------------------------------------------------------------------------------------
# transformers generate


def _generate(
    model: Any,
    prompts: Sequence[Sequence[int]],
    n: int,
    sampling: Sampling,
    pad_id: int,
    stop_ids: Collection[int],
) -> tuple[list[list[int]], list[list[float]]]:
    """transformers ``generate`` on the left-padded prompts, each repeated n times."""
    import torch  # deferred: torch is heavy

    device = _device(model)
    width = max(len(p) for p in prompts)
    # the copies are expanded here, as num_return_sequences does (greedy search refuses n > 1)
    rows = [p for p in prompts for _ in range(n)]
    ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in rows], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in rows], device=device)
    kwargs: dict[str, Any] = {"max_new_tokens": sampling.max_new_tokens,
                              "pad_token_id": pad_id, "eos_token_id": sorted(stop_ids),
                              "return_dict_in_generate": True, "output_logits": True}
    if sampling.temperature > 0:
        kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p,
                      top_k=sampling.top_k or None)
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    out = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    new = out.sequences[:, width:]
    scale = sampling.temperature if sampling.temperature > 0 else 1.0
    logits = torch.stack(out.logits, dim=1).float() / scale
    logps = torch.log_softmax(logits, dim=-1).gather(2, new[:, :, None])[:, :, 0]
    ids_out = [_cut(row, stop_ids) for row in new.tolist()]
    return ids_out, [lp[: len(i)] for lp, i in zip(logps.tolist(), ids_out, strict=True)]
