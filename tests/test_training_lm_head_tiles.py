"""The tiled fused LM head equals TRL's: log-probs, entropies, loss and gradients, on every path calling it.

The tiny Qwen2 model of the session fixture in float32, eval mode. TRL's head folds the vocabulary in
other chunks than the tiled one, so values agree to float32 rounding of the same sums (tolerances as in
tests/test_training_shared_prefix_logps.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from tooltune.training.lm_head_tiles import tile_fused_lm_head, unsupported_reason
from tooltune.training.shared_prefix import grouped_logps

ATOL = 1e-5
GRAD_ATOL, GRAD_RTOL = 1e-5, 1e-4
OUTPUTS = ("log_probs", "entropy")


def fused_model(model_dir: Path, tiles: int | None) -> torch.nn.Module:
    """The tiny model with TRL's fused head, re-patched with `tiles` tokens per tile (None: TRL's)."""
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    add_fused_lm_head(model, temperature=0.7, outputs=OUTPUTS)
    if tiles is not None:
        assert tile_fused_lm_head(model, tokens=tiles, temperature=0.7, outputs=OUTPUTS) is None
    return model


def batch(vocab: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Two groups of 3 rows: left-padded prompts of 7 and 11 tokens, right-padded completions of 1-5."""
    g = torch.Generator().manual_seed(seed)
    prompt_ids = torch.zeros(6, 11, dtype=torch.long)
    prompt_mask = torch.zeros(6, 11, dtype=torch.long)
    for row in range(6):
        length = 7 if row < 3 else 11
        prompt_ids[row, 11 - length :] = torch.randint(1, vocab, (length,), generator=torch.Generator()
                                                       .manual_seed(seed + (row >= 3)))
        prompt_mask[row, 11 - length :] = 1
    completion_ids = torch.randint(1, vocab, (6, 5), generator=g)
    completion_mask = torch.zeros(6, 5, dtype=torch.long)
    for row, length in enumerate((5, 1, 3, 4, 2, 5)):
        completion_mask[row, :length] = 1
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask}


def run(model: torch.nn.Module, inputs: dict[str, torch.Tensor], path: str | None) -> dict[str, torch.Tensor]:
    """Log-probs, entropies and parameter gradients of a GRPO-like loss, through the shared-prefix `path`
    or (None) TRL's own per-row call."""
    model.zero_grad(set_to_none=True)
    if path is None:
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, : inputs["prompt_ids"].size(1)] = -100
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        c = inputs["completion_ids"].size(1)
        logps, entropy, loss = out.log_probs[:, -c:], out.entropy[:, -c:], out.loss
    else:
        got = grouped_logps(model, *inputs.values(), return_entropy=True, fused_lm_head=True, path=path)
        logps, entropy, loss = got.logps, got.entropy, None
    weights = torch.linspace(-1.0, 1.0, logps.numel()).view_as(logps)
    ((logps * weights).sum() + 0.1 * (entropy * weights).sum()).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return {"logps": logps.detach(), "entropy": entropy.detach(), "loss": loss, **grads}


@pytest.mark.parametrize("path", [None, "kv_cache", "packed"])
@pytest.mark.parametrize("tiles", [1, 4, 4096])
def test_tiled_head_equals_trls(tiny_model_dir: Path, path: str | None, tiles: int) -> None:
    trl_model, tiled_model = fused_model(tiny_model_dir, None), fused_model(tiny_model_dir, tiles)
    inputs = batch(trl_model.config.vocab_size)
    want, got = run(trl_model, inputs, path), run(tiled_model, inputs, path)
    assert set(got) == set(want) and len(want) > 5  # every parameter received a gradient in both
    for key, value in want.items():
        if value is None:
            assert got[key] is None
        elif key in ("logps", "entropy", "loss"):
            torch.testing.assert_close(got[key], value, atol=ATOL, rtol=0, msg=key)
        else:
            torch.testing.assert_close(got[key], value, atol=GRAD_ATOL, rtol=GRAD_RTOL, msg=key)
    # padding scores zero, as TRL's head returns it
    pad = inputs["completion_mask"] == 0
    assert (got["logps"][pad] == 0).all() and (got["entropy"][pad] == 0).all()


def test_only_scored_positions_reach_the_head(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The head projects the positions with a label, in tiles of at most `tokens`."""
    from trl import kernels

    sizes: list[int] = []
    apply = kernels.ChunkedLogProbFunction.apply

    def counting(hidden: torch.Tensor, *args: object) -> object:
        sizes.append(hidden.size(0))
        return apply(hidden, *args)

    monkeypatch.setattr(kernels.ChunkedLogProbFunction, "apply", counting)
    model = fused_model(tiny_model_dir, 4)
    inputs = batch(model.config.vocab_size)
    run(model, inputs, None)
    assert sum(sizes) == int(inputs["completion_mask"].sum()) == 20 and max(sizes) == 4


def test_a_batch_without_labels_gives_zeros_connected_to_the_model(tiny_model_dir: Path) -> None:
    model = fused_model(tiny_model_dir, 4)
    ids = torch.randint(1, model.config.vocab_size, (2, 6))
    out = model(input_ids=ids, labels=torch.full_like(ids, -100), fused_lm_head=True)
    assert (out.log_probs == 0).all() and out.log_probs.shape == (2, 5)
    out.log_probs.sum().backward()  # an all-masked micro-batch must not fail in backward
    assert model.lm_head.weight.grad is not None or model.get_input_embeddings().weight.grad is not None


def test_calls_without_the_fused_head_are_trls(tiny_model_dir: Path) -> None:
    import inspect

    model, plain = fused_model(tiny_model_dir, 4), fused_model(tiny_model_dir, None)
    # generation asks the signature for logits_to_keep: it must still see the model's own parameters
    assert inspect.signature(model.forward) == inspect.signature(plain.forward)
    assert "logits_to_keep" in inspect.signature(model.forward).parameters
    ids = torch.randint(1, model.config.vocab_size, (2, 6))
    torch.testing.assert_close(model(input_ids=ids).logits, plain(input_ids=ids).logits, atol=0, rtol=0)


def test_models_it_cannot_reproduce_keep_trls_head(tiny_model_dir: Path) -> None:
    bare = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    assert "no fused LM head" in unsupported_reason(bare)
    assert tile_fused_lm_head(bare, tokens=4, temperature=1.0) is not None
    capped = fused_model(tiny_model_dir, None)
    capped.config.final_logit_softcapping = 30.0
    forward = capped.forward
    assert "soft-capped" in tile_fused_lm_head(capped, tokens=4, temperature=1.0)
    assert capped.forward == forward
    with pytest.raises(ValueError, match="tokens"):
        tile_fused_lm_head(fused_model(tiny_model_dir, None), tokens=0, temperature=1.0)
