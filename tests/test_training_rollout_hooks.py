"""GRPO rollouts through the group-prefill path (`grpo.rollout_path`): TRL's tokens, the path metric, LoRA
and activation checkpointing, and two CPU processes (torchrun, gloo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_training_grpo import KeyedReward, N, make_config, make_rows

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def run_one_step(model_dir: Path, out: Path, monkeypatch: pytest.MonkeyPatch, checkpointing: bool = False,
                 **over: Any) -> tuple[list[list[int]], list[dict[str, Any]]]:
    """One GRPO step; (the completion ids TRL scored, the metric records)."""
    from tooltune.training import grpo
    from tooltune.training.runner import train

    monkeypatch.undo()  # the spies of an earlier run in this test
    seen: list[list[int]] = []
    orig_rewards, orig_init = grpo.ToolTuneGRPOTrainer._calculate_rewards, grpo.ToolTuneGRPOTrainer.__init__

    def rewards(self: Any, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        seen.extend(list(c) for c in completion_ids_list)
        return orig_rewards(self, inputs, prompts, completions, completion_ids_list)

    def init(self: Any, *a: Any, **k: Any) -> None:
        orig_init(self, *a, **k)
        if checkpointing:  # the run forces it off on CPU; TRL's generation context turns it off and on again
            self.model.gradient_checkpointing_enable()

    monkeypatch.setattr(grpo.ToolTuneGRPOTrainer, "_calculate_rewards", rewards)
    monkeypatch.setattr(grpo.ToolTuneGRPOTrainer, "__init__", init)
    cfg = make_config(model_dir, out, **{"grpo.max_steps": 1, "run.seed": 3, **over})
    run = train(cfg, reward_funcs=[KeyedReward(solved=set())], train_rows=make_rows(4))
    return seen, [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def path_metric(records: list[dict[str, Any]]) -> float:
    return next(r["tooltune/rollout_group_prefill"] for r in records if "tooltune/rollout_group_prefill" in r)


LORA = {"model.lora.r": 4, "model.lora.alpha": 8}


@pytest.mark.parametrize("over,checkpointing", [({}, False), (LORA, True)])
def test_group_prefill_rollouts_equal_trls_generate(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, over: dict, checkpointing: bool
) -> None:
    ours, ours_metrics = run_one_step(tiny_model_dir, tmp_path / "ours", monkeypatch, checkpointing, **over)
    trls, trls_metrics = run_one_step(tiny_model_dir, tmp_path / "trl", monkeypatch, checkpointing,
                                      **{"grpo.rollout_path": "generate", **over})
    assert path_metric(ours_metrics) == 1.0 and path_metric(trls_metrics) == 0.0
    assert len(ours) == 2 * N and all(1 <= len(c) <= 8 for c in ours)
    assert ours == trls  # the same draws from the same seed: one multinomial per step over the same rows


# One GRPO step in each of two processes; every rank records the path of each generation call.
SCRIPT = r"""
import json, os, sys
sys.path[:0] = [sys.argv[3], sys.argv[4]]
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
torch.set_num_threads(1)
from test_training_grpo import N, KeyedReward, make_config, make_rows
from tooltune.training import rollout_hooks
from tooltune.training.runner import shutdown_processes, train

rank = int(os.environ.get("RANK", "0"))
orig = rollout_hooks.sample

def spy(*a, **k):
    got = orig(*a, **k)
    with open(f"{sys.argv[2]}.rank{rank}", "a") as f:
        f.write(json.dumps([got.path, len(got.ids)]) + "\n")
    return got

rollout_hooks.sample = spy
cfg = make_config(sys.argv[1], sys.argv[2], **{"grpo.max_steps": 1, "grpo.per_device_batch_size": 4})
train(cfg, reward_funcs=[KeyedReward(set())], train_rows=make_rows(4))
shutdown_processes()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="gloo CPU processes are tested on Linux")
def test_two_processes_generate_on_the_group_prefill_path(tiny_model_dir: Path, tmp_path: Path) -> None:
    script, out = tmp_path / "run.py", tmp_path / "run"
    script.write_text(SCRIPT)
    paths = [str(REPO), str(TESTS), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
           str(29700 + os.getpid() % 1000), str(script), str(tiny_model_dir), str(out), str(TESTS), str(REPO)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stderr[-4000:]
    for rank in (0, 1):  # 2 prompts x 4 rollouts per step: one group of 4 rows per rank
        calls = [json.loads(x) for x in Path(f"{out}.rank{rank}").read_text().splitlines()]
        assert calls == [["group_prefill", 4]]
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert path_metric(records) == 1.0


class FakeTrainer:
    """The attributes of TRL's trainer that the hooks read, set per test."""

    def __init__(self, rollout_path: str = "auto", **over: Any) -> None:
        from types import SimpleNamespace

        from tooltune.training.trainer_state import ToolTuneState

        self.tooltune = ToolTuneState(rollout_path=rollout_path)
        self.use_vllm, self.use_transformers_continuous_batching = False, False
        self.min_p, self.repetition_penalty = None, 1.0
        self.is_fsdp_enabled = self.is_deepspeed_enabled = False
        self.args = SimpleNamespace(generation_kwargs=None)
        self.state, self.model = SimpleNamespace(global_step=0), SimpleNamespace(training=True)
        self.rollout_func = None
        self.__dict__.update(over)


@pytest.mark.parametrize("over,reason", [
    ({}, None),
    ({"rollout_path": "generate"}, "grpo.rollout_path is generate"),
    ({"use_vllm": True}, "vLLM"),
    ({"min_p": 0.1}, "min_p"),
    ({"repetition_penalty": 1.1}, "repetition penalty"),
    ({"is_deepspeed_enabled": True}, "sharded"),
])
def test_calls_sample_cannot_reproduce_stay_on_trls_generation(over: dict, reason: str | None) -> None:
    from tooltune.training.rollout_hooks import RolloutHooks

    trainer = FakeTrainer(**over)
    got = RolloutHooks._tt_rollout_problem(trainer, None, {})
    if reason is None:
        assert got is None
        assert "multimodal" in RolloutHooks._tt_rollout_problem(trainer, None, {"pixel_values": 1})
    else:
        assert reason in got


def test_episode_cache_lives_for_one_step_in_one_mode() -> None:
    from tooltune.training.rollout_hooks import RolloutHooks

    trainer = FakeTrainer()
    assert RolloutHooks._tt_episode_cache(trainer) is None  # no rollout function: single-turn GRPO
    trainer.rollout_func = object()
    first = RolloutHooks._tt_episode_cache(trainer)
    assert first is not None and RolloutHooks._tt_episode_cache(trainer) is first
    trainer.state.global_step = 1  # the weights changed
    second = RolloutHooks._tt_episode_cache(trainer)
    assert second is not first
    trainer.model.training = False
    assert RolloutHooks._tt_episode_cache(trainer) is not second


class FakeRunner:
    """vLLM's model runner as the weight sync sees it: a model whose merged linear layer (``qkv_proj``)
    has its parameter with or without ``weight_loader``, and ``reload_weights`` recording its calls."""

    def __init__(self, weight_loader: bool, reload: bool = True) -> None:
        import torch

        attn = torch.nn.Module()
        attn.qkv_proj = torch.nn.Linear(2, 6, bias=False)
        attn.o_proj = torch.nn.Linear(2, 2, bias=False)  # not merged: never needs weight_loader here
        self.model = torch.nn.Module()
        self.model.self_attn = attn
        self.model.packed_modules_mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}
        if weight_loader:  # as vLLM's GPU path leaves it
            attn.qkv_proj.weight.weight_loader = lambda *a: None
        self.reloads: list[tuple[list[str], bool]] = []
        if reload:
            self.reload_weights = lambda weights_iterator, is_checkpoint_format: self.reloads.append(
                ([name for name, _ in weights_iterator], is_checkpoint_format))


def fake_vllm_trainer(runner: FakeRunner, mode: str = "colocate") -> Any:
    """A trainer with TRL's colocated `vllm_generation` around `runner`; `calls` records what ran."""
    from types import SimpleNamespace

    calls: list[str] = []
    llm = SimpleNamespace(reset_prefix_cache=lambda: calls.append("reset_prefix_cache"),
                          llm_engine=SimpleNamespace(model_executor=SimpleNamespace(
                              driver_worker=SimpleNamespace(model_runner=runner))))
    generation = SimpleNamespace(
        mode=mode, llm=llm, enable_sleep_mode=False,
        sync_weights=lambda: calls.append("trl"),
        _iter_named_params=lambda: iter([("model.embed_tokens.weight", 0), ("model.norm.weight", 1)]))
    trainer = FakeTrainer(use_vllm=True, vllm_generation=generation)
    trainer.calls = calls
    return trainer


@pytest.mark.parametrize("runner,mode,reloads", [
    (FakeRunner(weight_loader=False), "colocate", True),  # vLLM's CPU backend: the fallback
    (FakeRunner(weight_loader=True), "colocate", False),  # a GPU: TRL's sync unchanged
    (FakeRunner(weight_loader=False, reload=False), "colocate", False),  # no reload to fall back on
    (FakeRunner(weight_loader=False), "server", False),  # the server loads its own weights
])
def test_vllm_weight_sync_falls_back_to_reload_only_where_trls_cannot_load(
    runner: FakeRunner, mode: str, reloads: bool, caplog: pytest.LogCaptureFixture
) -> None:
    from tooltune.training.rollout_hooks import RolloutHooks

    trainer = fake_vllm_trainer(runner, mode)
    RolloutHooks._tt_vllm_weight_sync(trainer)
    trainer.vllm_generation.sync_weights()
    trainer.vllm_generation.sync_weights()
    if reloads:
        assert trainer.calls == ["reset_prefix_cache"] * 2
        assert runner.reloads == [(["model.embed_tokens.weight", "model.norm.weight"], True)] * 2
        assert "(e.g. self_attn.qkv_proj.weight) have no weight_loader" in caplog.text
        assert caplog.text.count("reload_weights instead") == 1
    else:
        assert trainer.calls == ["trl", "trl"] and runner.reloads == []
        assert "reload_weights" not in caplog.text


def test_vllm_weight_sync_is_untouched_without_vllm() -> None:
    from tooltune.training.rollout_hooks import RolloutHooks

    trainer = fake_vllm_trainer(FakeRunner(weight_loader=False))
    trainer.use_vllm = False
    RolloutHooks._tt_vllm_weight_sync(trainer)
    trainer.vllm_generation.sync_weights()
    assert trainer.calls == ["trl"]


def test_trls_vllm_generation_has_what_the_fallback_calls() -> None:
    from trl.generation.vllm_generation import VLLMGeneration

    from tooltune.training.engine_fence import parameters

    assert parameters(VLLMGeneration.sync_weights) == "self"
    assert parameters(VLLMGeneration._iter_named_params) == "self"


def test_rollouts_of_a_model_on_the_packed_update_read_each_group_prompt_once(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packed update switches the model to its own attention name; the sampler still sees sdpa and
    decodes through cascade attention instead of copying every group's prompt keys to each rollout."""
    from tooltune.generation import cascade_attention

    reasons: list[tuple[str, str | None]] = []
    orig = cascade_attention.unsupported_reason

    def spy(model: Any) -> str | None:
        reasons.append((model.config._attn_implementation, why := orig(model)))
        return why

    packed = {"grpo.cpu_gradient_checkpointing": True, "grpo.shared_prefix_path": "packed"}
    cascade_attention.unsupported_reason = spy  # run_one_step resets the monkeypatch it is handed
    try:
        _, records = run_one_step(tiny_model_dir, tmp_path / "packed", monkeypatch, **packed)
    finally:
        cascade_attention.unsupported_reason = orig
    assert path_metric(records) == 1.0
    assert next(r["tooltune/packed_update"] for r in records if "tooltune/packed_update" in r) == 1.0
    assert reasons and reasons == [("sdpa", None)] * len(reasons)
