"""Prefilling one prompt at a time: the padded batch's layout and keys, the same rollouts, the rule."""

from __future__ import annotations

import pytest
import torch

from tooltune.generation import rollout
from tooltune.generation.prefill import one_at_a_time, prefill_each
from tooltune.generation.rollout import Sampling, sample
from tooltune.models.tiny import SIZES, tiny_model

PAD, STOP = 0, 1


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return tiny_model(SIZES["test"], initializer_range=0.3, num_key_value_heads=1).eval()


def prompts_of(*lengths: int, seed: int = 2) -> list[tuple[int, ...]]:
    g = torch.Generator().manual_seed(seed)
    return [tuple(torch.randint(3, 384, (n,), generator=g).tolist()) for n in lengths]


def test_the_rule() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    uneven, even = [[1, 2, 3], [4]], [[1, 2], [3, 4]]
    assert one_at_a_time("auto", cpu, uneven)
    assert not one_at_a_time("auto", cpu, even)  # no padding, no mask: the batch takes the fused kernel
    assert not one_at_a_time("auto", cuda, uneven)
    assert one_at_a_time("each", cuda, even)
    assert not one_at_a_time("batch", cpu, uneven)
    with pytest.raises(ValueError, match="prefill must be one of auto, batch, each, got 'fast'"):
        one_at_a_time("fast", cpu, uneven)


def test_each_gives_the_padded_batch_layout_and_keys(model: torch.nn.Module) -> None:
    prompts = prompts_of(9, 4, 14)
    with torch.inference_mode():
        batch, mask, _, batch_logits = rollout._prefill(model, prompts, 5, PAD, None, "batch")
        each, each_mask, _, each_logits = rollout._prefill(model, prompts, 5, PAD, None, "each")
        cache, logits = prefill_each(model, prompts, 5, torch.device("cpu"))
    assert torch.equal(mask, each_mask)
    assert torch.allclose(logits, each_logits) and torch.allclose(batch_logits, each_logits, atol=1e-5)
    for lb, le in zip(batch.layers, each.layers, strict=True):
        assert le.capacity == lb.capacity == 14 + 5 and le.length == lb.length == 14
        real = mask.bool()
        for b, e in ((lb.keys, le.keys), (lb.values, le.values)):
            assert torch.allclose(b.transpose(1, 2)[real], e.transpose(1, 2)[real], atol=1e-5)
            assert not e.transpose(1, 2)[~real].any()  # padding slots: zeros, never attended
    assert cache.layers[0].length == 14


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_rollouts_equal_either_way(model: torch.nn.Module, temperature: float) -> None:
    prompts = [list(p) for p in prompts_of(6, 15, 3, 11)]
    prompts.append(list(prompts[1]))  # a repeated prompt is computed once
    s = Sampling(10, temperature=temperature, seed=3)
    batch = sample(model, prompts, 3, s, pad_id=PAD, stop_ids={STOP}, prefill="batch")
    each = sample(model, prompts, 3, s, pad_id=PAD, stop_ids={STOP}, prefill="each")
    assert each.ids == batch.ids
    for a, b in zip(each.logprobs, batch.logprobs, strict=True):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-4)
