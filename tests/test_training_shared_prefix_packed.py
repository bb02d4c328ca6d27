"""The packed shared-prefix path equals the ordinary per-row computation: log-probs, entropies and every
parameter gradient, with activation checkpointing on and off, under each attention implementation that
takes the pattern, with LoRA, and in two processes under DDP and FSDP.

The test-size tiny Qwen2 model in float32 (no dropout, so training and eval mode compute the same
values). Batches mix prompt lengths (left padding) and completion lengths (right padding), from
tests/test_training_shared_prefix_logps.py. Tolerances are that file's: log-probs and entropies within atol
1e-5 (seen: under 3e-6), gradients within atol 1e-5 and rtol 1e-4 (seen: under 1e-7), float32 rounding
of the same sums taken in another order.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_training_shared_prefix_logps import ATOL, _assert_same_grads, _grads, _inputs, make_batch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from tooltune.training.shared_prefix import call_problem, grouped_logps, ordinary_logps, prompt_groups
from tooltune.training.shared_prefix.packed import allowed, attention_mask, pack_rows
from tooltune.training.shared_prefix.packed_attention import NAME, use_packed_attention

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def load(tiny_model_dir: Path, implementation: str = NAME, checkpointing: bool = False) -> torch.nn.Module:
    """The tiny model with the given attention implementation; checkpointing on means training mode."""
    kind = "sdpa" if implementation == NAME else implementation
    model = AutoModelForCausalLM.from_pretrained(
        tiny_model_dir, dtype=torch.float32, attn_implementation=kind
    )
    if implementation == NAME:
        assert use_packed_attention(model)
    if checkpointing:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        model.train()
    else:
        model.eval()
    return model


def compare(model: torch.nn.Module, batch: dict, temperature: float = 1.0, **kw) -> object:
    """Packed vs ordinary: log-probs, entropies and every parameter gradient; returns the packed result."""
    ref_logps, ref_entropy = ordinary_logps(model, *_inputs(batch), temperature, return_entropy=True)
    ref_grads = _grads(model, ref_logps, batch)
    out = grouped_logps(
        model, *_inputs(batch), temperature=temperature, return_entropy=True, path="packed", **kw
    )
    torch.testing.assert_close(out.logps, ref_logps, atol=ATOL, rtol=0)
    torch.testing.assert_close(out.entropy, ref_entropy, atol=ATOL, rtol=0)
    assert (out.logps[batch["completion_mask"] == 0] == 0).all()
    _assert_same_grads(model, _grads(model, out.logps, batch), ref_grads)
    return out


def test_the_pattern_keeps_completions_apart() -> None:
    """Each entry of the packed attention pattern against the rule, on a left-padded two-group batch."""
    prompt_ids = torch.tensor([[0, 5, 6, 7]] * 2 + [[8, 9, 10, 11]] * 3)
    prompt_mask = torch.tensor([[0, 1, 1, 1]] * 2 + [[1, 1, 1, 1]] * 3)
    completion_ids = torch.arange(15).view(5, 3) + 20
    completion_mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 0, 0]])
    groups = prompt_groups(prompt_ids, prompt_mask)
    packed = pack_rows(prompt_ids, prompt_mask, completion_ids, completion_mask, groups)
    k, p, s = 3, 3, 4  # the larger group has 3 rows; P - 1 shared columns; segments of 1 + C
    assert packed.input_ids.shape == (2, p + k * s) and packed.segments == k
    assert packed.position_ids[0].tolist() == [0, 1, 2] + [3, 4, 5, 6] * k
    mask = allowed(packed)
    for g in range(2):
        for q in range(p + k * s):
            for j in range(p + k * s):
                seg_q, seg_j = packed.segment[q].item(), packed.segment[j].item()
                rule = j <= q and (seg_j == 0 or seg_j == seg_q) and bool(packed.valid[g, j])
                assert bool(mask[g, 0, q, j]) == rule, (g, q, j)
    for row in range(5):  # every row's tokens sit in its own segment
        g, slot = divmod(packed.slot[row].item(), k)
        start = p + slot * s
        assert packed.input_ids[g, start].item() == prompt_ids[row, -1].item()
        assert packed.input_ids[g, start + 1 : start + s].tolist() == completion_ids[row].tolist()
    assert not packed.valid[0, p + 2 * s : p + 3 * s].any()  # the 2-row group's empty third segment
    assert not packed.valid[0, 0]  # its left padding


@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointing"])
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_packed_equals_ordinary_path(
    tiny_model_dir: Path, checkpointing: bool, n: int, temperature: float
) -> None:
    model = load(tiny_model_dir, checkpointing=checkpointing)
    out = compare(model, make_batch(model.config.vocab_size, n), temperature)
    assert out.fallback is None and out.prompt_rows == 3  # each of the 3 prompts ran once


@pytest.mark.parametrize("implementation", [NAME, "sdpa", "eager"])
def test_each_attention_implementation_takes_the_pattern(tiny_model_dir: Path, implementation: str) -> None:
    """tooltune_packed (blocks of sdpa), plain sdpa (one dense boolean mask), eager (an additive mask)."""
    model = load(tiny_model_dir, implementation, checkpointing=True)
    batch = make_batch(model.config.vocab_size, n=4, seed=1)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(0))
    out = compare(model, {k: v[perm] for k, v in batch.items()}, temperature=0.7)  # rows in any order
    assert out.fallback is None and out.prompt_rows == 3


def test_grouped_query_attention_and_chunks_that_cut_groups() -> None:
    """Fewer key/value heads than query heads; chunks of 5 rows cut groups (uneven groups, empty segments)."""
    config = Qwen2Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config).eval()
    assert use_packed_attention(model)
    out = compare(model, make_batch(128, n=4, seed=2), batch_size=5)
    assert out.fallback is None and out.prompt_rows == 5  # 0-4 | 5-9 | 10-11: 2 + 2 + 1 prompts


def test_masked_tokens_inside_completions_and_right_padded_prompts(tiny_model_dir: Path) -> None:
    model = load(tiny_model_dir, checkpointing=True)
    batch = make_batch(model.config.vocab_size, n=2, seed=3)
    batch["completion_mask"][::2, 1] = 0  # a hole inside some completions
    lengths = batch["prompt_mask"].sum(dim=1).tolist()
    width = batch["prompt_ids"].size(1)
    for key in ("prompt_ids", "prompt_mask"):
        batch[key] = torch.stack([row.roll(length - width) for row, length in zip(batch[key], lengths)])
    assert compare(model, batch).fallback is None


@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointing"])
def test_trl_fused_head(tiny_model_dir: Path, checkpointing: bool) -> None:
    """With TRL's fused LM head (labels given pre-shifted), packed equals TRL's own per-row call."""
    from trl.trainer.utils import add_fused_lm_head

    model = load(tiny_model_dir, checkpointing=checkpointing)
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    batch = make_batch(model.config.vocab_size, n=4, seed=4)
    ref_logps, ref_entropy = ordinary_logps(model, *_inputs(batch), return_entropy=True, fused_lm_head=True)
    ref_grads = _grads(model, ref_logps, batch)
    out = grouped_logps(model, *_inputs(batch), return_entropy=True, fused_lm_head=True, path="packed")
    assert out.fallback is None and out.prompt_rows == 3
    torch.testing.assert_close(out.logps, ref_logps, atol=ATOL, rtol=0)
    torch.testing.assert_close(out.entropy, ref_entropy, atol=ATOL, rtol=0)
    _assert_same_grads(model, _grads(model, out.logps, batch), ref_grads)


@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointing"])
def test_lora_adapter_gradients(tiny_model_dir: Path, checkpointing: bool) -> None:
    from peft import LoraConfig, get_peft_model

    base = load(tiny_model_dir, checkpointing=checkpointing)
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = get_peft_model(base, config)
    if checkpointing:
        model.enable_input_require_grads()  # as TRL does for PEFT under checkpointing
    model.train(checkpointing)
    assert call_problem(model, 8, "packed") is None
    out = compare(model, make_batch(base.config.vocab_size, n=3, seed=5), temperature=0.7)
    assert out.fallback is None and out.prompt_rows == 3
    assert all("lora_" in name for name, p in model.named_parameters() if p.requires_grad)


def test_flex_attention_values(tiny_model_dir: Path) -> None:
    """flex_attention takes the pattern as a BlockMask. On CPU torch has no flex backward (and compiles the
    forward, seconds), so only the values are compared here."""
    model = load(tiny_model_dir, "flex_attention")
    plain = load(tiny_model_dir, "sdpa")
    batch = make_batch(model.config.vocab_size, n=2, seed=6)
    with torch.no_grad():
        ref, _ = ordinary_logps(plain, *_inputs(batch), 0.7)
        out = grouped_logps(model, *_inputs(batch), 0.7, path="packed")
    assert out.fallback is None
    torch.testing.assert_close(out.logps, ref, atol=ATOL, rtol=0)
    mask = attention_mask(pack_rows(*_inputs(batch), prompt_groups(*_inputs(batch)[:2])), "flex_attention")
    assert type(mask).__name__ == "BlockMask"


def test_refusals(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = load(tiny_model_dir)
    assert call_problem(model, 8, "packed") is None
    assert "fewer than 2 columns" in call_problem(model, 1, "packed")
    model.config._attn_implementation = "flash_attention_2"  # no arbitrary mask
    assert "takes no custom mask" in call_problem(model, 8, "packed")
    with monkeypatch.context() as m:
        m.setattr(Qwen2ForCausalLM, "_is_stateful", True)
        stateful = load(tiny_model_dir)
        assert "stateful" in call_problem(stateful, 8, "packed")
        batch = make_batch(stateful.config.vocab_size, n=2, seed=7)
        out = grouped_logps(stateful, *_inputs(batch), path="packed")  # refused: the ordinary path
        assert out.fallback is not None and "stateful" in out.fallback
        torch.testing.assert_close(out.logps, ordinary_logps(stateful, *_inputs(batch))[0], atol=0, rtol=0)
    sliding = Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, use_sliding_window=True, sliding_window=4, max_window_layers=0,
    )
    assert "DynamicSlidingWindowLayer" in call_problem(Qwen2ForCausalLM(sliding), 8, "packed")


def test_the_packed_attention_is_sdpa_for_every_other_call(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A model switched to tooltune_packed computes ordinary forwards and generation as under sdpa, and
    saves no trace of it."""
    plain = load(tiny_model_dir, "sdpa")
    switched = load(tiny_model_dir)
    assert switched.config._attn_implementation == NAME
    assert not use_packed_attention(load(tiny_model_dir, "eager"))  # only sdpa models are switched
    batch = make_batch(plain.config.vocab_size, n=2, seed=8)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logits = [m(input_ids=ids, attention_mask=mask).logits for m in (switched, plain)]
        torch.testing.assert_close(*logits)
        greedy = {"max_new_tokens": 4, "do_sample": False, "pad_token_id": 0}
        prompt = {"input_ids": batch["prompt_ids"][:2], "attention_mask": batch["prompt_mask"][:2]}
        assert torch.equal(switched.generate(**prompt, **greedy), plain.generate(**prompt, **greedy))
    switched.save_pretrained(tmp_path / "saved")
    assert NAME not in (tmp_path / "saved" / "config.json").read_text()


# ---------------------------------------------------------------- two processes: DDP and FSDP

SCRIPT = r"""
import json, os, sys
sys.path[:0] = [sys.argv[2], sys.argv[3]]
import torch, torch.distributed as dist
torch.set_num_threads(1)
from transformers import AutoModelForCausalLM
from test_training_shared_prefix_logps import make_batch, _inputs
from tooltune.training.shared_prefix import grouped_logps
from tooltune.training.shared_prefix.packed_attention import use_packed_attention

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
out_dir = sys.argv[4]
report = {}
for mode in ("ddp", "ddp_static_graph", "fsdp"):
    model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32, attn_implementation="sdpa")
    assert use_packed_attention(model)
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    if mode == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for layer in model.model.layers:
            fully_shard(layer)
        wrapped = fully_shard(model)
    else:
        wrapped = torch.nn.parallel.DistributedDataParallel(model, static_graph=mode == "ddp_static_graph")
    batch = make_batch(model.config.vocab_size, n=4, seed=11)
    tokens = batch["completion_mask"].sum()
    rows = batch["prompt_ids"].size(0) // world
    for step in range(2):  # two steps: DDP's static graph is recorded on the first
        wrapped.zero_grad(set_to_none=True)
        part = {k: v[rank * rows : (rank + 1) * rows] for k, v in batch.items()}
        out = grouped_logps(wrapped, *_inputs(part), path="packed")
        assert out.fallback is None, out.fallback
        # both wrappers average the gradients of the processes: scale the loss to the batch's sum
        loss = -(part["advantages"][:, None] * out.logps * part["completion_mask"]).sum() * world / tokens
        loss.backward()
    grads = {}
    for name, p in model.named_parameters():
        g = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        grads[name.removeprefix("module.")] = g.detach().clone()
    if rank == 0:
        torch.save(grads, os.path.join(out_dir, f"{mode}.pt"))
    report[mode] = out.prompt_rows
if rank == 0:
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(report, f)
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="gloo CPU processes are tested on Linux")
def test_two_processes_ddp_and_fsdp_gradients_equal_the_ordinary_path(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Two gloo processes, each with half the rows (6 of 3 groups x 4: one whole group and half of
    another), activation checkpointing on: DDP (default and static graph) and FSDP2 (`fully_shard` per
    decoder layer and on the model; torch supports it on CPU with gloo) give the gradients of the
    ordinary path over the whole batch in one process."""
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS), env.get("PYTHONPATH", "")])
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        "--master_port", str(29600 + os.getpid() % 1000),
        str(script), str(tiny_model_dir), str(TESTS), str(REPO), str(tmp_path),
    ]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stderr[-4000:]
    assert json.loads((tmp_path / "report.json").read_text()) == {"ddp": 2, "ddp_static_graph": 2, "fsdp": 2}
    plain = load(tiny_model_dir, "sdpa")
    batch = make_batch(plain.config.vocab_size, n=4, seed=11)
    ref_logps, _ = ordinary_logps(plain, *_inputs(batch))
    ref_grads = _grads(plain, ref_logps, batch)
    for mode in ("ddp", "ddp_static_graph", "fsdp"):
        _assert_same_grads(plain, torch.load(tmp_path / f"{mode}.pt"), ref_grads)


# ---------------------------------------------------------------- the trainer: path chosen per call


def test_trainer_with_checkpointing_runs_the_packed_update_and_equals_the_ordinary_step(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """One GRPO step with activation checkpointing on (forced on CPU here) and a reference model
    (beta > 0): the policy update runs packed, the reference pass (no gradients) the KV cache, each logged
    once with its reason; the weights equal those of the same step with sharing off."""
    from safetensors.torch import load_file
    from test_training_grpo import KeyedReward, make_config, make_rows

    from tooltune.training import grpo_stage, runner

    grpo_args = grpo_stage.grpo_args

    def with_checkpointing(*args: object, **kw: object) -> object:
        out = grpo_args(*args, **kw)  # the runner turns checkpointing off on CPU; on here
        out.activation_checkpointing = out.gradient_checkpointing = True
        return out

    monkeypatch.setattr(grpo_stage, "grpo_args", with_checkpointing)
    runs = {}
    for shared in (False, True):
        cfg = make_config(tiny_model_dir, tmp_path / f"shared_{shared}", **{
            "grpo.max_steps": 1, "grpo.learning_rate": 1e-3, "grpo.beta": 0.01, "grpo.shared_prefix": shared})
        with caplog.at_level(logging.INFO, logger="tooltune.training.shared_prefix.hooks"):
            caplog.clear()
            runs[shared] = runner.train(cfg, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))
            messages = [r.getMessage() for r in caplog.records]
    assert any("policy update on the packed path: activation checkpointing" in m for m in messages), messages
    assert any("reference log-probs on the kv_cache path" in m for m in messages), messages
    records = [json.loads(x) for x in (runs[True] / "metrics.jsonl").read_text().splitlines()]
    assert [r["tooltune/packed_update"] for r in records if "tooltune/packed_update" in r] == [1.0]
    assert any(r.get("tooltune/prompt_rows_share", 1) < 1 for r in records)
    off = load_file(str(runs[False] / "final" / "model.safetensors"))
    on = load_file(str(runs[True] / "final" / "model.safetensors"))
    for k in off:
        torch.testing.assert_close(on[k], off[k], atol=1e-6, rtol=0)
