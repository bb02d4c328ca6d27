"""Cascade attention: the shared-prompt and per-row partial softmaxes combine to ordinary attention."""

from __future__ import annotations

import types

import torch

from tooltune.generation.cascade_attention import cascade_attention, group_cache_class
from tooltune.generation.rollout_cache import slot_cache_class


def test_equals_attention_over_the_concatenated_keys_with_padding_and_uneven_groups() -> None:
    g = torch.Generator().manual_seed(0)
    kv_heads, heads, dim, width, generated = 2, 6, 8, 7, 3
    prompt_mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]])
    groups = [0, 0, 1, 2, 2, 2, 1]  # uneven, not consecutive: the queries are scattered, not a view
    prompt = [tuple(torch.randn(3, kv_heads, width, dim, generator=g) for _ in range(2))]
    prefilled = slot_cache_class().allocate(width, prompt, 1)
    cache = group_cache_class().from_prompts(prefilled, prompt_mask, groups, generated)
    assert not cache.dense
    rows = len(groups)
    layer = cache.layers[0]
    for _ in range(generated):  # the decode steps write each row's own keys
        keys, values = layer.update(torch.randn(rows, kv_heads, 1, dim, generator=g),
                                    torch.randn(rows, kv_heads, 1, dim, generator=g))
    query = torch.randn(rows, heads, 1, dim, generator=g)
    out, _ = cascade_attention(types.SimpleNamespace(layer_idx=0), query, keys, values, None, scaling=0.3,
                               group_cache=cache)

    index = torch.tensor(groups)
    all_keys = torch.cat([prompt[0][0][index], keys], dim=2)
    all_values = torch.cat([prompt[0][1][index], values], dim=2)
    visible = torch.cat([prompt_mask[index], torch.ones(rows, generated, dtype=torch.long)], dim=1).bool()
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, all_keys, all_values, attn_mask=visible[:, None, None, :], scale=0.3, enable_gqa=True)
    assert out.shape == (rows, 1, heads, dim)
    assert torch.allclose(out, expected.transpose(1, 2), atol=1e-6)
    assert torch.equal(cache.row_states(layer, 2)[0], all_keys[2])
    kept = cache.selected([1, 3, 6])  # rows leave: their groups are taken along
    assert kept.group.tolist() == [0, 2, 1] and kept.layers[0].keys.shape[0] == 3
