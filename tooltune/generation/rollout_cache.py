"""KV storage for `tooltune.generation.rollout`: pre-sized per-layer buffers and a cache of sequences.

`SlotLayer` is a transformers cache layer over a tensor allocated once at the length a call can reach
(prompt + max_new_tokens): each forward writes its new keys and values into the next slots and the
attention reads a view of the filled part, so a decode step copies one slot per layer where
`DynamicLayer` concatenates (copies) the whole cache. Because the view has exactly the filled length,
attention sees the same keys as with `DynamicCache` (no masked tail as in `StaticCache`).

`PrefixCache` keeps, between calls, the keys and values of token sequences (an episode's context with
the completion it got), so that the next turn of that episode prefills only what was appended.
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


@functools.cache
def slot_cache_class() -> type:
    """`SlotCache`, a transformers `Cache` of `SlotLayer`s (built on first use: transformers is heavy).

    ``SlotCache.allocate(capacity, prefixes, num_layers)`` gives layers of `capacity` slots (the first
    ones filled from `prefixes`, per layer (keys, values), when given); ``SlotCache.filled(buffers,
    length)`` layers over given buffers;
    ``cache.expanded(rows, capacity)`` a new cache whose row i is row ``rows[i]`` of this one (rows in runs
    of copies), ``cache.selected(rows)`` one of the given rows only."""
    from transformers.cache_utils import Cache, DynamicLayer  # deferred: transformers is heavy

    class SlotLayer(DynamicLayer):
        """One layer's keys and values in buffers ``[rows, heads, capacity, head_dim]`` allocated at the
        first `update` with the dtype and shape of the states the model computes (under autocast too):
        `length` slots are filled, `update` writes after them and returns views of the filled part; mask
        sizes and sequence length follow `DynamicLayer` through those views. `prefix` (keys, values)
        fills the first slots before the first update."""

        def __init__(self, capacity: int, prefix: tuple[torch.Tensor, torch.Tensor] | None = None,
                     buffers: tuple[torch.Tensor, torch.Tensor] | None = None, length: int = 0) -> None:
            super().__init__()
            self.capacity, self.prefix, self.length = capacity, prefix, length
            self.key_buffer, self.value_buffer = buffers if buffers is not None else (None, None)
            if prefix is not None:
                self.length = prefix[0].shape[2]
                self.keys, self.values = prefix
            if buffers is not None:
                self.dtype, self.device = buffers[0].dtype, buffers[0].device
                self.is_initialized = True
                self._set_views()

        def _set_views(self) -> None:
            self.keys = self.key_buffer[:, :, : self.length]
            self.values = self.value_buffer[:, :, : self.length]

        def _allocate(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            rows, heads = key_states.shape[:2]
            self.key_buffer = key_states.new_zeros((rows, heads, self.capacity, key_states.shape[3]))
            self.value_buffer = value_states.new_zeros((rows, heads, self.capacity, value_states.shape[3]))
            if self.prefix is not None:
                self.key_buffer[:, :, : self.length] = self.prefix[0]
                self.value_buffer[:, :, : self.length] = self.prefix[1]
                self.prefix = None
            self.dtype, self.device = key_states.dtype, key_states.device
            self.is_initialized = True

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
                   **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            if self.key_buffer is None:
                self._allocate(key_states, value_states)
            end = self.length + key_states.shape[-2]
            if end > self.capacity:
                raise RuntimeError(f"KV buffer of {self.capacity} slots cannot hold {end} tokens")
            self.key_buffer[:, :, self.length : end] = key_states
            self.value_buffer[:, :, self.length : end] = value_states
            self.length = end
            self._set_views()
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length

        def crop(self, tokens_to_remove: int) -> None:
            # only assisted / speculative decoding crops a cache; the rollout loop never does
            raise TypeError(f"SlotLayer: a rollout cache cannot be cropped "
                            f"(asked to remove {tokens_to_remove} tokens)")

    class SlotCache(Cache):
        def __init__(self, layers: list[SlotLayer]) -> None:
            super().__init__(layers=layers)

        @classmethod
        def allocate(cls, capacity: int, prefixes: list[tuple[torch.Tensor, torch.Tensor]] | None,
                     num_layers: int) -> SlotCache:
            if prefixes is None:
                return cls([SlotLayer(capacity) for _ in range(num_layers)])
            return cls([SlotLayer(capacity, prefix) for prefix in prefixes])

        @classmethod
        def filled(cls, buffers: list[tuple[torch.Tensor, torch.Tensor]], length: int) -> SlotCache:
            """A cache over per-layer (keys, values) buffers whose first `length` slots are filled."""
            return cls([SlotLayer(pair[0].shape[2], buffers=pair, length=length) for pair in buffers])

        def expanded(self, rows: Sequence[int], capacity: int) -> SlotCache:
            runs = _runs(rows)
            layers = []
            for layer in self.layers:
                pair = []
                for filled in (layer.keys, layer.values):
                    buffer = filled.new_empty((len(rows), filled.shape[1], capacity, filled.shape[3]))
                    for source, start, count in runs:  # a broadcast copy: far faster than index_select
                        buffer[start : start + count, :, : layer.length] = filled[source : source + 1]
                    pair.append(buffer)
                layers.append(SlotLayer(capacity, buffers=(pair[0], pair[1]), length=layer.length))
            return SlotCache(layers)

        def selected(self, rows: Sequence[int]) -> SlotCache:
            return SlotCache([SlotLayer(layer.capacity, buffers=buffers_of_rows(layer, rows),
                                        length=layer.length) for layer in self.layers])

        def row_states(self, layer: SlotLayer, row: int) -> tuple[torch.Tensor, torch.Tensor]:
            """Row `row`'s filled keys and values ``[kv_heads, length, dim]``."""
            return layer.key_buffer[row, :, : layer.length], layer.value_buffer[row, :, : layer.length]

    return SlotCache


def buffers_of_rows(layer: Any, rows: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """New key and value buffers of `layer` (same capacity) holding the filled slots of `rows` only."""
    pair = []
    for buffer in (layer.key_buffer, layer.value_buffer):
        kept = buffer.new_empty((len(rows), *buffer.shape[1:]))
        kept[:, :, : layer.length] = buffer[rows, :, : layer.length]
        pair.append(kept)
    return pair[0], pair[1]


def _runs(rows: Sequence[int]) -> list[tuple[int, int, int]]:
    """(value, start, length) of each run of equal consecutive values of `rows`."""
    runs: list[tuple[int, int, int]] = []
    for i, r in enumerate(rows):
        if runs and runs[-1][0] == r:
            runs[-1] = (r, runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((r, i, 1))
    return runs


class PrefixCache:
    """Keys and values of token sequences kept between calls, least recently used evicted first.

    `max_tokens` bounds the tokens held over all entries and `max_entries` their number. A sequence
    stored as the extension of a held one replaces it (an episode keeps one entry, its latest turn).
    The keys depend on the weights: `clear()` after the model changes (a training step)."""

    def __init__(self, max_tokens: int = 16384, max_entries: int = 64) -> None:
        if max_tokens < 1 or max_entries < 1:
            raise ValueError(f"PrefixCache: max_tokens and max_entries must be >= 1, got {max_tokens}, "
                             f"{max_entries}")
        self.max_tokens, self.max_entries = max_tokens, max_entries
        self._entries: OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = OrderedDict()
        self._tokens = 0
        self.hits = self.tokens_reused = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def tokens(self) -> int:
        """Tokens held over all entries."""
        return self._tokens

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0

    def longest_prefix(self, tokens: Sequence[int]) -> tuple[int, tuple[int, ...] | None]:
        """(how many leading tokens of `tokens` an entry holds, that entry) for the entry sharing the
        longest common prefix with `tokens`; (0, None) when none shares one. The keys of a common prefix
        are the prefix's own (causal attention), so a partial match is reusable as well."""
        best, best_key = 0, None
        tokens = tuple(tokens)
        for key in self._entries:
            limit = min(len(key), len(tokens))
            if limit <= best or key[0] != tokens[0]:
                continue
            # an episode's context extends its previous turn: one comparison finds it
            common = limit if tokens[:limit] == key[:limit] else _common_prefix(key, tokens, limit)
            if common > best:
                best, best_key = common, key
        return best, best_key

    def take(self, key: tuple[int, ...], length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The first `length` slots of entry `key`, per layer ``(keys, values)`` of ``[heads, length, dim]``;
        the entry becomes the most recently used."""
        self._entries.move_to_end(key)
        self.hits += 1
        self.tokens_reused += length
        return [(k[:, :length], v[:, :length]) for k, v in self._entries[key]]

    def put(self, tokens: Sequence[int], layers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Store the keys and values (per layer ``[heads, len(tokens), dim]``) of `tokens`, replacing the
        entries it extends, then evict the least recently used beyond the bounds."""
        key = tuple(tokens)
        if not key or len(key) > self.max_tokens:
            return
        for old in [k for k in self._entries if len(k) <= len(key) and key[: len(k)] == k]:
            self._drop(old)
        self._entries[key] = [(k.clone(), v.clone()) for k, v in layers]
        self._tokens += len(key)
        while self._tokens > self.max_tokens or len(self._entries) > self.max_entries:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple[int, ...]) -> None:
        del self._entries[key]
        self._tokens -= len(key)


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...], limit: int) -> int:
    """Length of the common prefix of `a` and `b`, which differ within their first `limit` tokens, by
    halving: slice compares run in C."""
    low, high = 0, limit  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low
