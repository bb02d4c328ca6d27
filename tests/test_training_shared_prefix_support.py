"""The shared-prefix rules written once: the model inside its wrappers, which path applies and why not,
the first row of each group and the completion log-probs from logits."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2ForCausalLM

from tooltune.training.shared_prefix.support import (
    PATHS,
    base_model,
    call_problem,
    checkpointing_active,
    first_rows,
    model_problem,
    token_logps,
    without_wrappers,
)


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


class Wrapper(torch.nn.Module):
    """What DDP, FSDP1 and a DeepSpeed engine have in common: the wrapped model as `.module`."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module


def test_wrappers_and_a_peft_adapter_are_looked_through(model: torch.nn.Module) -> None:
    from peft import LoraConfig, get_peft_model

    assert without_wrappers(Wrapper(Wrapper(model))) is model and base_model(model) is model
    peft = get_peft_model(model, LoraConfig(r=2, target_modules="all-linear"))
    try:
        assert without_wrappers(Wrapper(peft)) is peft  # the adapter stays: its config is read there
        assert base_model(Wrapper(peft)) is model
        assert all(model_problem(Wrapper(peft), path) is None for path in PATHS)
    finally:
        peft.unload()


def test_each_path_says_why_it_cannot_share(
    tiny_model_dir: Path, model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert model.config._attn_implementation == "sdpa"
    assert [call_problem(model, 8, path) for path in PATHS] == [None, None]
    assert all("fewer than 2 columns" in call_problem(model, 1, path) for path in PATHS)
    with pytest.raises(ValueError, match="path: one of"):
        model_problem(model, "dense")
    flash = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    flash.config._attn_implementation = "flash_attention_2"
    assert model_problem(flash, "kv_cache") is None  # the KV cache needs no custom mask
    assert "takes no custom mask" in model_problem(flash, "packed")
    with monkeypatch.context() as m:
        m.setattr(Qwen2ForCausalLM, "_is_stateful", True)
        assert all("has no standard KV cache" in model_problem(model, path) for path in PATHS)


def test_checkpointing_refuses_the_kv_cache_in_training_mode_only(tiny_model_dir: Path) -> None:
    ckpt = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ckpt.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    ckpt.train()
    assert checkpointing_active(ckpt)
    assert "gradient checkpointing" in call_problem(Wrapper(ckpt), 8, "kv_cache")
    assert call_problem(ckpt, 8, "packed") is None  # a packed forward has no cache to lose
    ckpt.eval()
    assert not checkpointing_active(ckpt) and call_problem(ckpt, 8, "kv_cache") is None


def test_first_rows_of_groups_in_any_order() -> None:
    assert first_rows(torch.tensor([2, 0, 2, 1, 0, 1])).tolist() == [1, 3, 0]


def test_token_logps_gather_the_completion_tokens_under_the_temperature() -> None:
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[1, 4, 0], [2, 2, 3]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    logps, entropy = token_logps(logits, ids, mask, 0.5, return_entropy=True)
    expected = torch.log_softmax(logits / 0.5, dim=-1)
    assert logps[0, 1] == pytest.approx(float(expected[0, 1, 4]))
    assert logps[1, 2] == pytest.approx(float(expected[1, 2, 3]))
    assert logps[0, 2] == 0 and entropy[0, 2] == 0  # padding
    assert entropy[1, 0] == pytest.approx(float(-(expected[1, 0].exp() * expected[1, 0]).sum()))
    assert token_logps(logits, ids, mask, 1.0, return_entropy=False)[1] is None
