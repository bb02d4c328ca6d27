"""verl launch settings: in sync with the presets, valid verl 0.9.1 keys, compute_score loaded by path.

verl itself is not installed (it pins transformers < 5.11); its contract is checked instead: the
override keys below exist in verl 0.9.1's `verl/trainer/config/_generated_ppo_trainer.yaml`, and the
reward entry point is loaded from a file path and called as verl's reward loading does.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path

import pytest
import yaml

from tooltune.training.config import ConfigError, load_config
from tooltune.training.verl_launch import launch_command, launch_settings, reward_env, verl_overrides

REPO = Path(__file__).resolve().parents[1]
NAMES = ["tool_n1", "efficient_single_turn", "efficient_multi_turn", "r2if"]

# Keys present in verl 0.9.1's generated PPO trainer config (checked against the released wheel).
VERL_091_KEYS = {
    "actor_rollout_ref.actor.clip_ratio_high",
    "actor_rollout_ref.actor.clip_ratio_low",
    "actor_rollout_ref.actor.entropy_coeff",
    "actor_rollout_ref.actor.grad_clip",
    "actor_rollout_ref.actor.kl_loss_coef",
    "actor_rollout_ref.actor.kl_loss_type",
    "actor_rollout_ref.actor.loss_agg_mode",
    "actor_rollout_ref.actor.optim.lr",
    "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio",
    "actor_rollout_ref.actor.optim.weight_decay",
    "actor_rollout_ref.actor.ppo_epochs",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.use_kl_loss",
    "actor_rollout_ref.model.path",
    "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.rollout.name",
    "actor_rollout_ref.rollout.temperature",
    "actor_rollout_ref.rollout.top_k",
    "actor_rollout_ref.rollout.top_p",
    "algorithm.adv_estimator",
    "algorithm.filter_groups.enable",
    "algorithm.filter_groups.metric",
    "algorithm.norm_adv_by_std_in_grpo",
    "algorithm.use_kl_in_reward",
    "data.filter_overlong_prompts",
    "data.max_prompt_length",
    "data.max_response_length",
    "data.train_batch_size",
    "data.train_files",
    "data.val_files",
    "reward.custom_reward_function.name",
    "reward.custom_reward_function.path",
    "trainer.default_local_dir",
    "trainer.experiment_name",
    "trainer.logger",
    "trainer.n_gpus_per_node",
    "trainer.nnodes",
    "trainer.project_name",
    "trainer.save_freq",
    "trainer.test_freq",
    "trainer.total_epochs",
    "trainer.total_training_steps",
}


def _verl_schema_keys() -> set[str] | None:
    """Every dotted key of the installed verl's trainer config, when verl is installed."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "trainer/config/_generated_ppo_trainer.yaml"
    keys: set[str] = set()

    def walk(d: dict, prefix: str) -> None:
        for k, v in d.items():
            keys.add(prefix + k)
            if isinstance(v, dict):
                walk(v, prefix + k + ".")

    walk(yaml.safe_load(path.read_text()), "")
    return keys


@pytest.mark.parametrize("name", NAMES)
def test_committed_settings_match_the_presets(name: str) -> None:
    committed = yaml.safe_load((REPO / "configs/verl" / f"{name}.yaml").read_text())
    fresh = launch_settings(f"configs/{name}.yaml")
    assert committed == json.loads(json.dumps(fresh))


@pytest.mark.parametrize("name", NAMES)
def test_override_keys_exist_in_verl(name: str) -> None:
    cfg = load_config(REPO / "configs" / f"{name}.yaml", {"grpo.max_steps": 5})
    cfg.downsample.enabled = cfg.downsample.drop_zero_variance = True  # emits the optional keys too
    keys = set(verl_overrides(cfg)) | {
        "data.train_files",
        "data.val_files",
        "trainer.nnodes",
        "trainer.n_gpus_per_node",
    }
    schema = _verl_schema_keys() or VERL_091_KEYS
    assert keys <= schema, sorted(keys - schema)


def test_recipe_numbers_reach_verl() -> None:
    st = verl_overrides(load_config(REPO / "configs/efficient_single_turn.yaml"))
    assert st["actor_rollout_ref.rollout.n"] == 8 and st["data.train_batch_size"] == 128
    assert (st["actor_rollout_ref.actor.clip_ratio_low"], st["actor_rollout_ref.actor.clip_ratio_high"]) == (
        0.2,
        0.28,
    )
    assert (
        st["actor_rollout_ref.actor.use_kl_loss"] is False
        and st["actor_rollout_ref.actor.entropy_coeff"] == 0
    )
    assert st["actor_rollout_ref.rollout.temperature"] == 0.7 and st["trainer.total_epochs"] == 10
    n1 = verl_overrides(load_config(REPO / "configs/tool_n1.yaml"))
    assert (
        n1["actor_rollout_ref.actor.use_kl_loss"] is True
        and n1["actor_rollout_ref.actor.kl_loss_coef"] == 1e-3
    )
    assert (
        n1["actor_rollout_ref.actor.kl_loss_type"] == "low_var_kl" and n1["algorithm.adv_estimator"] == "grpo"
    )
    r2 = verl_overrides(load_config(REPO / "configs/r2if.yaml"))
    assert (r2["data.train_batch_size"], r2["actor_rollout_ref.actor.ppo_mini_batch_size"]) == (512, 128)
    with pytest.raises(ConfigError, match="grpo.loss_type: 'cispo' has no verl equivalent"):
        verl_overrides(load_config(None, {"grpo.loss_type": "cispo"}))


def test_launch_command() -> None:
    settings = launch_settings("configs/efficient_multi_turn.yaml")
    cmd = launch_command(settings, "tr.parquet", "va.parquet", nnodes=2, gpus_per_node=4)
    assert cmd.startswith("TOOLTUNE_REWARD=") and "python3 -m verl.trainer.main_ppo" in cmd
    tokens = shlex.split(cmd)  # what the shell hands to verl's hydra
    assert json.loads(tokens[0].split("=", 1)[1])["components"] == {"correctness": 1.0, "format": 0.0}
    for part in (
        "actor_rollout_ref.rollout.n=16",
        "trainer.nnodes=2",
        "trainer.n_gpus_per_node=4",
        "data.train_files=tr.parquet",
        "reward.custom_reward_function.name=compute_score",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "trainer.logger=['console']",
    ):
        assert part in tokens


def test_compute_score_loads_by_path_with_the_preset_reward(monkeypatch: pytest.MonkeyPatch) -> None:
    # what verl's load_extern_object does: import the file given in reward.custom_reward_function.path
    settings = launch_settings("configs/efficient_single_turn.yaml")
    path = REPO / settings["overrides"]["reward.custom_reward_function.path"]
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, settings["overrides"]["reward.custom_reward_function.name"])
    monkeypatch.setenv(
        "TOOLTUNE_REWARD", reward_env(load_config("configs/efficient_single_turn.yaml"))["TOOLTUNE_REWARD"]
    )
    gold = [{"name": "f", "arguments": {"x": 1}}]
    good = '<think>call f</think>\n<tool_call>\n[{"name": "f", "arguments": {"x": 1}}]\n</tool_call>'
    out = fn("tooltune", good, json.dumps(gold), {"index": 0})
    assert out["score"] == 1.0 and out["format"] == 1.0
    assert fn("tooltune", good.replace('"x": 1', '"x": 2'), json.dumps(gold), {"index": 0})["score"] == 0.0
