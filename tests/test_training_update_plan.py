"""The memory estimate of the shared update and the checkpointing choice made from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from tooltune.training.config import LoRASection, TrainConfig
from tooltune.training.update_plan import (
    FIT_SHARE,
    GIB,
    longest_prompt_tokens,
    lora_parameters,
    plan_checkpointing,
    plan_for_run,
    update_bytes,
)

QWEN25 = {  # hidden, MLP width, layers, attention heads, key/value heads (Qwen2.5 configs)
    "0.5B": (896, 4864, 24, 14, 2),
    "1.5B": (1536, 8960, 28, 12, 2),
    "3B": (2048, 11008, 36, 16, 2),
}


def qwen25(shape: str) -> tuple[Qwen2Config, int]:
    hidden, mlp, layers, heads, kv = QWEN25[shape]
    config = Qwen2Config(
        vocab_size=151936, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv, tie_word_embeddings=True,
    )
    with torch.device("meta"):  # counts the parameters without allocating them
        params = sum(p.numel() for p in Qwen2ForCausalLM(config).parameters())
    return config, params


@pytest.mark.parametrize(
    ("shape", "prompt", "n", "measured_gib"),
    [
        ("0.5B", 512, 8, 12.4),
        ("0.5B", 2048, 8, 18.6),
        ("1.5B", 1024, 8, 26.9),
        ("1.5B", 2048, 8, 35.6),
        ("1.5B", 2048, 16, 57.5),
        ("3B", 2048, 8, 56.6),
    ],
)
def test_estimate_against_the_peaks_measured_on_an_h200(
    shape: str, prompt: int, n: int, measured_gib: float
) -> None:
    """The KV-cache shared update's peak memory measured on an H200 (docs/training.md: bf16, random init,
    2 prompts per step, completions of 256 tokens, forward + backward, no optimizer; the LM head it used is
    not recorded, and counting materialised logits, `logits=True`, is what fits): the estimate reads
    between 2% under and 28% over."""
    config, params = qwen25(shape)
    estimate = update_bytes(config, params, params, 2, 2 * n, n, prompt, 256, moments=0, logits=True)
    assert 0.97 <= estimate / (measured_gib * GIB) <= 1.3


def test_estimate_grows_with_what_the_update_holds() -> None:
    config, params = qwen25("1.5B")
    base = update_bytes(config, params, params, 2, 16, 8, 1024, 256)
    assert update_bytes(config, params, params, 2, 16, 8, 2048, 256) > base  # longer prompts
    assert update_bytes(config, params, params, 2, 32, 8, 1024, 256) > base  # more rows
    assert update_bytes(config, params, params // 100, 2, 16, 8, 1024, 256) < base  # LoRA
    assert update_bytes(config, params, params, 2, 16, 8, 1024, 256, reference=True) > base
    assert update_bytes(config, params, params, 2, 16, 8, 1024, 256, shards=8) < base
    # the optimizer's two moments: 2 bytes each per bf16 weight
    assert base - update_bytes(config, params, params, 2, 16, 8, 1024, 256, moments=0) == 4 * params


def test_plan_turns_checkpointing_off_only_when_the_estimate_fits() -> None:
    device = 80 * GIB
    fits = plan_checkpointing(int(device * FIT_SHARE) - 1, device)
    assert not fits.checkpointing and "checkpointing off" in fits.reason
    over = plan_checkpointing(int(device * FIT_SHARE) + GIB, device)
    assert over.checkpointing and "checkpointing on" in over.reason
    # vLLM colocated keeps its share of the device: the same estimate no longer fits
    assert plan_checkpointing(int(device * FIT_SHARE) - 1, device, reserved_share=0.3).checkpointing
    assert over.to_dict()["estimate_bytes"] == over.estimate_bytes


def test_plan_for_run_on_cpu_and_when_forced(tiny_model_dir: Path) -> None:
    from tooltune.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(tiny_model_dir)
    cfg = TrainConfig()
    assert plan_for_run(cfg, model, tok, [], cpu=True).checkpointing is False
    if not torch.cuda.is_available():  # no GPU: run.gradient_checkpointing as set, whatever auto says
        cfg.run.gradient_checkpointing = True
        plan = plan_for_run(cfg, model, tok, [], cpu=False)
        assert plan.checkpointing and "no CUDA device" in plan.reason
    cfg.run.auto_checkpointing, cfg.run.gradient_checkpointing = False, False
    plan = plan_for_run(cfg, model, tok, [], cpu=False)
    assert not plan.checkpointing and "run.auto_checkpointing is false" in plan.reason


def test_cpu_checkpointing_is_a_setting_and_the_update_runs_checkpointed(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from test_training_grpo import KeyedReward, make_config, make_rows

    import tooltune.training.shared_prefix.hooks as hooks
    from tooltune.training.grpo_stage import grpo_args
    from tooltune.training.runner import train

    cfg = make_config(tiny_model_dir, tmp_path / "run", **{"grpo.cpu_gradient_checkpointing": True,
                                                          "grpo.max_steps": 1})
    assert grpo_args(cfg, str(tmp_path), cpu=True, checkpointing=True).gradient_checkpointing
    cfg.grpo.cpu_gradient_checkpointing = False
    assert not grpo_args(cfg, str(tmp_path), cpu=True, checkpointing=True).gradient_checkpointing
    cfg.grpo.cpu_gradient_checkpointing = True
    seen: list[bool] = []
    real = hooks.checkpointing_active
    monkeypatch.setattr(hooks, "checkpointing_active", lambda m: seen.append(real(m)) or seen[-1])
    train(cfg, reward_funcs=[KeyedReward(set())], train_rows=make_rows(4))
    plan = json.loads((tmp_path / "run" / "summary.json").read_text())["update_plan"]
    assert plan["checkpointing"] and "grpo.cpu_gradient_checkpointing" in plan["reason"]
    assert seen and all(seen)  # every gradient-carrying call of the update ran with checkpointed layers


def test_lora_parameters_count_what_peft_trains(tiny_model_dir: Path) -> None:
    from peft import LoraConfig, get_peft_model

    from tooltune.models import load_model_and_tokenizer

    for targets in (["all-linear"], ["q_proj", "v_proj"]):
        model, _ = load_model_and_tokenizer(tiny_model_dir)
        section = LoRASection(r=4, target_modules=targets)
        expected = lora_parameters(model, section)
        peft = get_peft_model(model, LoraConfig(r=4, target_modules=targets[0] if targets == ["all-linear"]
                                                else targets))
        assert expected == sum(p.numel() for p in peft.parameters() if p.requires_grad)


def test_longest_prompt_tokens(tiny_model_dir: Path) -> None:
    from tooltune.models import load_model_and_tokenizer

    _, tok = load_model_and_tokenizer(tiny_model_dir)
    rows = [{"prompt": [{"role": "user", "content": "call the tool " * k}]} for k in (1, 9, 3)]
    lengths = [len(tok.apply_chat_template(r["prompt"], tokenize=True, add_generation_prompt=True,
                                           return_dict=True)["input_ids"]) for r in rows]
    assert longest_prompt_tokens(rows, tok) == max(lengths)
    assert longest_prompt_tokens(rows, tok, sample=1) == max(lengths)  # the longest text is sampled first


@pytest.mark.parametrize(("device_gib", "checkpointing"), [(80.0, False), (0.001, True)])
def test_plan_for_run_on_a_gpu_decides_from_the_estimate(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, device_gib: float, checkpointing: bool
) -> None:
    """The GPU branch with the device's memory stubbed (no GPU here): the tiny model's update fits 80 GiB
    and not 1 MiB."""
    from types import SimpleNamespace

    from test_training_grpo import make_rows

    from tooltune.models import load_model_and_tokenizer

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    props = SimpleNamespace(total_memory=int(device_gib * GIB))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _: props)
    model, tok = load_model_and_tokenizer(tiny_model_dir)
    cfg = TrainConfig()
    plan = plan_for_run(cfg, model, tok, make_rows(4), cpu=False)
    assert plan.checkpointing is checkpointing
    assert plan.estimate_bytes > 0 and plan.budget_bytes == int(props.total_memory * FIT_SHARE)
    assert ("checkpointing on" if checkpointing else "checkpointing off") in plan.reason
