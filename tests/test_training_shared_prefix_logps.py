"""Shared-prefix log-probs equal the ordinary per-row computation: values, entropies and gradients.

The test-size tiny Qwen2 model in float32 and eval mode (dropout off). Batches mix prompt lengths (left
padding) and completion lengths (right padding). Tolerances: per-token log-probs and entropies within
atol 1e-5, float32 rounding of the same sums taken in a different batching (seen: log-probs under 1e-6,
entropies, values near 6, under 3e-6); parameter gradients within atol 1e-5 and rtol 1e-4, since each
prompt's gradient sums its n rows' contributions in another order than n separate prompt passes do
(seen: under 1e-7 for gradients up to 0.4; the rtol covers entries far from zero, the atol those near it).
"""

from __future__ import annotations

import gc
import logging
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from tooltune.training.shared_prefix import (
    NO_REPEAT,
    PrefixLogps,
    grouped_logps,
    ordinary_logps,
    prompt_groups,
    shuffle_groups,
)
from tooltune.training.shared_prefix import logps as logps_module

ATOL = 1e-5
GRAD_ATOL, GRAD_RTOL = 1e-5, 1e-4
PROMPT_LENS = (9, 4, 14)  # one group per length: the 14-token prompt sets the padded width
COMPLETION = 6


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


@pytest.fixture(autouse=True)
def fresh_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logps_module, "_LOGGED", set())


def make_batch(vocab: int, n: int, prompt_lens=PROMPT_LENS, seed: int = 0) -> dict[str, torch.Tensor]:
    """Groups of n rows sharing a left-padded prompt; right-padded completions of 1..COMPLETION tokens."""
    g = torch.Generator().manual_seed(seed)
    width = max(prompt_lens)
    prompts, masks = [], []
    for length in prompt_lens:
        ids = torch.zeros(width, dtype=torch.long)
        mask = torch.zeros(width, dtype=torch.long)
        ids[width - length :] = torch.randint(1, vocab, (length,), generator=g)
        mask[width - length :] = 1
        prompts.append(ids)
        masks.append(mask)
    prompt_ids = torch.stack(prompts).repeat_interleave(n, dim=0)
    prompt_mask = torch.stack(masks).repeat_interleave(n, dim=0)
    rows = prompt_ids.size(0)
    completion_ids = torch.randint(1, vocab, (rows, COMPLETION), generator=g)
    lengths = torch.randint(1, COMPLETION + 1, (rows,), generator=g)
    lengths[0] = COMPLETION  # at least one row uses the full width
    completion_mask = (torch.arange(COMPLETION) < lengths[:, None]).long()
    completion_ids = completion_ids.masked_fill(completion_mask == 0, 0)
    advantages = torch.randn(rows, generator=g)
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages,
    }


def _inputs(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return tuple(batch[k] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask"))


def _grads(model: torch.nn.Module, logps: torch.Tensor, batch: dict[str, torch.Tensor]) -> dict:
    """Gradients of a GRPO-style loss: -sum(advantage * logp over the completion mask) / tokens."""
    mask = batch["completion_mask"].float()
    loss = -(batch["advantages"][:, None] * logps * mask).sum() / mask.sum()
    model.zero_grad(set_to_none=True)
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


def _assert_same_grads(model: torch.nn.Module, ours: dict, ref: dict) -> None:
    assert ours.keys() == ref.keys() == {n for n, p in model.named_parameters() if p.requires_grad}
    for name in ref:
        torch.testing.assert_close(ours[name], ref[name], atol=GRAD_ATOL, rtol=GRAD_RTOL, msg=name)


def _compare(model: torch.nn.Module, batch: dict, temperature: float = 1.0, **kw) -> PrefixLogps:
    """Shared vs ordinary: log-probs, entropies and every parameter gradient; returns the shared result."""
    ref_logps, ref_entropy = ordinary_logps(model, *_inputs(batch), temperature, return_entropy=True)
    ref_grads = _grads(model, ref_logps, batch)
    out = grouped_logps(model, *_inputs(batch), temperature=temperature, return_entropy=True, **kw)
    torch.testing.assert_close(out.logps, ref_logps, atol=ATOL, rtol=0)
    torch.testing.assert_close(out.entropy, ref_entropy, atol=ATOL, rtol=0)
    assert (out.logps[batch["completion_mask"] == 0] == 0).all()
    _assert_same_grads(model, _grads(model, out.logps, batch), ref_grads)
    return out


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_shared_prompt_equals_ordinary_path(model: torch.nn.Module, n: int, temperature: float) -> None:
    batch = make_batch(model.config.vocab_size, n)
    out = _compare(model, batch, temperature)
    assert out.fallback is None
    assert out.prompt_rows == len(PROMPT_LENS)  # each prompt ran once


def test_rows_in_any_order_are_grouped_by_prompt(model: torch.nn.Module) -> None:
    batch = make_batch(model.config.vocab_size, n=4, seed=1)
    perm = torch.randperm(batch["prompt_ids"].size(0), generator=torch.Generator().manual_seed(3))
    shuffled = {k: v[perm] for k, v in batch.items()}  # as TRL shuffles rows before the update
    out = _compare(model, shuffled, temperature=0.7)
    assert out.fallback is None and out.prompt_rows == len(PROMPT_LENS)


def test_a_group_whose_prompts_differ_splits_and_stays_equal(model: torch.nn.Module) -> None:
    batch = make_batch(model.config.vocab_size, n=4, seed=2)
    batch["prompt_ids"][5, -2] = (batch["prompt_ids"][5, -2] + 1) % model.config.vocab_size  # group 1, row 1
    out = _compare(model, batch)
    assert out.fallback is None and out.prompt_rows == len(PROMPT_LENS) + 1


def test_no_shared_prompt_falls_back_and_stays_equal(
    model: torch.nn.Module, caplog: pytest.LogCaptureFixture
) -> None:
    batch = make_batch(model.config.vocab_size, n=2, seed=3)
    batch["prompt_ids"][1::2, -1] = (batch["prompt_ids"][1::2, -1] + 1) % model.config.vocab_size
    with caplog.at_level(logging.INFO, logger=logps_module.__name__):
        out = _compare(model, batch)
        _compare(model, batch)
    assert out.fallback == NO_REPEAT and out.prompt_rows == batch["prompt_ids"].size(0)
    assert sum(NO_REPEAT in r.getMessage() for r in caplog.records) == 1  # logged once


def test_chunks_split_groups_and_stay_equal(model: torch.nn.Module) -> None:
    batch = make_batch(model.config.vocab_size, n=4, seed=4)
    out = _compare(model, batch, temperature=0.7, batch_size=3)  # chunks of 3 rows cut through groups
    assert out.fallback is None
    assert out.prompt_rows == 6  # rows 0-2 | 3,4-5 | 6-7,8 | 9-11: one prompt, 2, 2, one


def test_right_padded_prompts_are_exact_too(model: torch.nn.Module) -> None:
    """Mask and positions are the concatenated row's, so any padding layout gives the ordinary result."""
    batch = make_batch(model.config.vocab_size, n=2, seed=5)
    lengths = batch["prompt_mask"].sum(dim=1).tolist()
    width = batch["prompt_ids"].size(1)
    for key in ("prompt_ids", "prompt_mask"):
        batch[key] = torch.stack([row.roll(length - width) for row, length in zip(batch[key], lengths)])
    assert batch["prompt_mask"][:, 0].all() and not batch["prompt_mask"][:, -1].all()
    out = _compare(model, batch)
    assert out.fallback is None


def test_trl_fused_head_equals_trls_path(tiny_model_dir: Path) -> None:
    """With TRL's fused LM head (as GRPOTrainer patches the policy), shared equals TRL's own per-row call."""
    from trl.trainer.utils import add_fused_lm_head

    fused = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    add_fused_lm_head(fused, temperature=0.7, outputs=("log_probs", "entropy"))
    batch = make_batch(fused.config.vocab_size, n=4, seed=6)
    ref_logps, ref_entropy = ordinary_logps(fused, *_inputs(batch), return_entropy=True, fused_lm_head=True)
    ref_grads = _grads(fused, ref_logps, batch)
    out = grouped_logps(fused, *_inputs(batch), return_entropy=True, fused_lm_head=True)
    assert out.fallback is None and out.prompt_rows == len(PROMPT_LENS)
    torch.testing.assert_close(out.logps, ref_logps, atol=ATOL, rtol=0)
    torch.testing.assert_close(out.entropy, ref_entropy, atol=ATOL, rtol=0)
    _assert_same_grads(fused, _grads(fused, out.logps, batch), ref_grads)
    # the fused head's temperature is the model's: the same numbers as the plain head at 0.7
    plain, _ = ordinary_logps(fused, *_inputs(batch), temperature=0.7)
    torch.testing.assert_close(out.logps, plain.detach(), atol=ATOL, rtol=0)


def test_gradient_checkpointing_in_training_falls_back(tiny_model_dir: Path) -> None:
    ckpt = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ckpt.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    ckpt.train()  # the tiny model has no dropout (attention_dropout 0): train mode is deterministic
    out = _compare(ckpt, make_batch(ckpt.config.vocab_size, n=2, seed=7))
    assert out.fallback is not None and "gradient checkpointing" in out.fallback
    ckpt.eval()  # checkpointing only acts in training mode
    assert _compare(ckpt, make_batch(ckpt.config.vocab_size, n=2, seed=7)).fallback is None


def test_sliding_window_attention_falls_back() -> None:
    config = Qwen2Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, use_sliding_window=True, sliding_window=4, max_window_layers=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        sliding = Qwen2ForCausalLM(config).eval()
    out = _compare(sliding, make_batch(128, n=2, seed=8))
    assert out.fallback is not None and "DynamicSlidingWindowLayer" in out.fallback


def test_shuffle_groups_keeps_each_prompts_rows_adjacent() -> None:
    batch = make_batch(vocab=50, n=4, prompt_lens=(3, 5, 2, 7, 4), seed=9)
    batch["row"] = torch.arange(20)
    batch["names"] = [f"r{i}" for i in range(20)]
    batch["num_items_in_batch"] = torch.tensor(77)
    torch.manual_seed(0)
    out = shuffle_groups(batch)
    order = out["row"]
    assert sorted(order.tolist()) == list(range(20)) and order.tolist() != list(range(20))
    assert out["names"] == [f"r{i}" for i in order.tolist()]
    assert out["num_items_in_batch"] is batch["num_items_in_batch"]
    for key in ("prompt_ids", "completion_mask", "advantages"):
        assert torch.equal(out[key], batch[key][order])
    groups = prompt_groups(out["prompt_ids"], out["prompt_mask"])
    changes = (groups[1:] != groups[:-1]).sum().item()
    assert changes == 4  # 5 groups, each one run of 4 rows
    seen = {tuple(out["row"][i : i + 4].div(4, rounding_mode="floor").tolist()) for i in range(0, 20, 4)}
    assert len(seen) == 5 and all(len(set(g)) == 1 for g in seen)


@pytest.mark.parametrize("find_unused", [False, True])
def test_through_distributed_data_parallel(tiny_model_dir: Path, tmp_path: Path, find_unused: bool) -> None:
    """Two forwards through DDP before one backward (a one-process gloo group: DDP's reducer still runs),
    over two steps of two accumulated micro-batches, the first under no_sync."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    ddp = None
    try:
        plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
        ddp = torch.nn.parallel.DistributedDataParallel(plain, find_unused_parameters=find_unused)
        batch = make_batch(plain.config.vocab_size, n=4, seed=10)
        halves = [{k: v[:4] for k, v in batch.items()}, {k: v[4:] for k, v in batch.items()}]
        ref_logps, _ = ordinary_logps(plain, *_inputs(batch))
        ref_grads = _grads(plain, ref_logps, batch)
        tokens = batch["completion_mask"].sum()
        for _step in range(2):
            ddp.zero_grad(set_to_none=True)
            for i, half in enumerate(halves):
                with ddp.no_sync() if i == 0 else torch.enable_grad():
                    out = grouped_logps(ddp, *_inputs(half))
                    assert out.fallback is None and out.prompt_rows == 1 + i  # rows 0-3 | 4-11
                    loss = -(half["advantages"][:, None] * out.logps * half["completion_mask"]).sum() / tokens
                    loss.backward()
        grads = {name: p.grad for name, p in plain.named_parameters()}
        _assert_same_grads(plain, grads, ref_grads)
    finally:
        # DDP's reducer holds the process group: free both here, while the group is alive, not in a
        # garbage collection during a later test (a gloo group torn down there once hung the suite)
        del ddp
        gc.collect()
        dist.destroy_process_group()


@pytest.mark.parametrize(
    "setting",
    [
        {},  # one micro-batch per step
        {"grpo.per_device_batch_size": 4},  # gradient accumulation over two micro-batches
        {"downsample.enabled": True, "downsample.m": 2},  # down-sampled groups still share their prompt
        {"grpo.shared_prefix_path": "packed", "grpo.per_device_batch_size": 4},  # the packed path forced
    ],
    ids=["one_micro_batch", "accumulation", "downsampling", "packed_path"],
)
def test_trainer_step_with_shared_prefix_equals_the_ordinary_step(
    tiny_model_dir: Path, tmp_path: Path, setting: dict
) -> None:
    import json

    from safetensors.torch import load_file
    from test_training_grpo import KeyedReward, make_config, make_rows

    from tooltune.training.runner import train

    runs = {}
    for shared in (False, True):
        cfg = make_config(tiny_model_dir, tmp_path / f"shared_{shared}", **{
            "grpo.max_steps": 1, "grpo.learning_rate": 1e-3, "grpo.shared_prefix": shared, **setting})
        runs[shared] = train(cfg, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))
    before = load_file(str(tiny_model_dir / "model.safetensors"))
    off = load_file(str(runs[False] / "final" / "model.safetensors"))
    on = load_file(str(runs[True] / "final" / "model.safetensors"))
    assert any(not torch.equal(before[k], off[k]) for k in off)  # the step changed the weights
    # Adam's first step is about lr × sign(gradient): equal gradients, equal updates. Where a gradient is
    # near Adam's eps its float rounding shows (the CPU's tiled LM head sums in other chunks on the two
    # paths: seen 1.3e-6 in 1 of 1,024 entries), so the bound is 0.2% of lr (1e-3) rather than 0.1%
    for k in off:
        torch.testing.assert_close(on[k], off[k], atol=2e-6, rtol=0)
    losses = {s: [json.loads(x)["loss"] for x in (r / "metrics.jsonl").read_text().splitlines()
                  if '"loss"' in x] for s, r in runs.items()}
    assert losses[True] == pytest.approx(losses[False], abs=1e-6)
    shares = [json.loads(x).get("tooltune/prompt_rows_share") for x in
              (runs[True] / "metrics.jsonl").read_text().splitlines()]
    assert any(s is not None and s < 1 for s in shares)  # prompts were actually shared


def test_model_class_without_a_kv_cache_takes_the_ordinary_path_with_one_warning(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """grpo.shared_prefix (on by default) on a model class that declares no standard KV cache: the
    trainer warns once, never shares, and its steps equal those of shared_prefix off."""
    import json

    from safetensors.torch import load_file
    from test_training_grpo import KeyedReward, make_config, make_rows

    from tooltune.training.config import GRPOSection
    from tooltune.training.runner import train

    assert GRPOSection().shared_prefix is True  # the default
    runs = {}
    for shared in (False, True):
        cfg = make_config(tiny_model_dir, tmp_path / f"shared_{shared}", **{
            "grpo.max_steps": 2, "grpo.learning_rate": 1e-3, "grpo.shared_prefix": shared})
        hooks = "tooltune.training.shared_prefix.hooks"
        with monkeypatch.context() as m, caplog.at_level(logging.WARNING, logger=hooks):
            m.setattr(Qwen2ForCausalLM, "_is_stateful", True)  # a recurrent-state model: no prompt cache
            caplog.clear()
            runs[shared] = train(cfg, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))
            warnings = [r.getMessage() for r in caplog.records if "grpo.shared_prefix" in r.getMessage()]
        if shared:
            assert len(warnings) == 1 and "has no standard KV cache" in warnings[0], warnings
        else:
            assert warnings == []
    records = {
        s: [json.loads(x) for x in (r / "metrics.jsonl").read_text().splitlines()] for s, r in runs.items()
    }
    assert not any("tooltune/prompt_rows_share" in x for x in records[True])  # nothing was shared
    losses = {s: [x["loss"] for x in recs if "loss" in x] for s, recs in records.items()}
    assert len(losses[True]) == 2 and losses[True] == pytest.approx(losses[False], abs=1e-6)
    off = load_file(str(runs[False] / "final" / "model.safetensors"))
    on = load_file(str(runs[True] / "final" / "model.safetensors"))
    for k in off:
        torch.testing.assert_close(on[k], off[k], atol=1e-6, rtol=0)


def test_shared_prefix_warns_once_per_reason_for_extra_inputs(
    tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A call with extra model inputs (e.g. token types) takes the ordinary path; the reason is logged
    once however many calls follow."""
    from tooltune.training.grpo import ToolTuneGRPOTrainer
    from tooltune.training.trainer_state import ToolTuneState

    trainer = ToolTuneGRPOTrainer.__new__(ToolTuneGRPOTrainer)  # _tt_shares needs only these attributes
    trainer.tooltune = ToolTuneState(shared_prefix=True)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)

    class Accelerator:
        @staticmethod
        def unwrap_model(m: torch.nn.Module) -> torch.nn.Module:
            return m

    trainer.accelerator = Accelerator()
    assert trainer._tt_shares(model, False, {"token_type_ids": None}) == "kv_cache"
    with caplog.at_level(logging.WARNING, logger="tooltune.training.shared_prefix.hooks"):
        for _ in range(3):
            assert trainer._tt_shares(model, False, {"token_type_ids": torch.zeros(2, 3)}) is None
            assert trainer._tt_shares(model, True, {}) is None
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "extra model inputs (token_type_ids)" in messages[0] and "auxiliary loss" in messages[1]
