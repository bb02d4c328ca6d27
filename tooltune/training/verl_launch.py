"""verl launch settings from a tooltune training config (verl 0.9.1 `verl.trainer.main_ppo` overrides).

verl is the engine the papers trained with; it is an optional extra (it pins transformers < 5.11, so
it lives in its own environment). The flow on a cluster:

    tooltune data export --format verl ...            # parquet: data_source, prompt, ability,
                                                      # reward_model {style, ground_truth}, extra_info
    python -m tooltune.training.verl_launch configs/verl/efficient_single_turn.yaml \\
        --train-files data/train.parquet --val-files data/val.parquet --nnodes 2 --gpus 8

which prints `TOOLTUNE_REWARD=... python3 -m verl.trainer.main_ppo key=value ...`. Rewards come from
`tooltune.training.verl:compute_score` (reward.custom_reward_function) with the preset's reward
composition passed in the TOOLTUNE_REWARD environment variable. Online pre-rollout filtering and
down-sampling are not verl features: `tooltune.training.selection` holds them as engine-independent
functions for a custom verl sampler; `downsample.drop_zero_variance` maps to verl's DAPO group filter
(which, unlike tooltune, refills the batch with fresh prompts).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

from tooltune.training.config import ConfigError, TrainConfig, load_config

VERL_ENTRY = "verl.trainer.main_ppo"
# TRL loss_type -> verl actor.loss_agg_mode
LOSS_AGG = {
    "dapo": "token-mean",
    "bnpo": "token-mean",
    "grpo": "seq-mean-token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
}


def verl_overrides(cfg: TrainConfig, reward_path: str = "tooltune/training/verl.py") -> dict[str, Any]:
    """The recipe as verl hydra overrides (dotted key -> value); data files and cluster size come later."""
    g, d = cfg.grpo, cfg.data
    if g.loss_type not in LOSS_AGG:
        raise ConfigError(
            f"grpo.loss_type: {g.loss_type!r} has no verl equivalent; choose one of {sorted(LOSS_AGG)}"
        )
    a, r = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
    out: dict[str, Any] = {
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": g.scale_rewards != "none",
        # KL is a loss term (Tool-N1: k3 estimator), not a reward penalty
        "algorithm.use_kl_in_reward": False,
        "data.train_batch_size": g.prompts_per_step,
        "data.max_prompt_length": d.max_prompt_tokens or 2048,
        "data.max_response_length": g.max_completion_length,
        "data.filter_overlong_prompts": bool(d.max_prompt_tokens),
        "actor_rollout_ref.model.path": cfg.model.name_or_path,
        f"{a}.optim.lr": g.learning_rate,
        f"{a}.optim.weight_decay": g.weight_decay,
        f"{a}.optim.lr_warmup_steps_ratio": g.warmup_ratio,
        f"{a}.ppo_mini_batch_size": g.prompts_per_update or g.prompts_per_step,
        f"{a}.ppo_epochs": g.num_iterations,
        f"{a}.use_kl_loss": g.beta > 0,
        f"{a}.kl_loss_coef": g.beta,
        f"{a}.kl_loss_type": "low_var_kl",  # the k3 estimator, as TRL's beta term
        f"{a}.entropy_coeff": g.entropy_coef,
        f"{a}.clip_ratio_low": g.epsilon,
        f"{a}.clip_ratio_high": g.epsilon_high or g.epsilon,
        f"{a}.loss_agg_mode": LOSS_AGG[g.loss_type],
        f"{a}.grad_clip": g.max_grad_norm,
        f"{r}.name": "vllm",
        f"{r}.n": g.num_generations,
        f"{r}.temperature": g.temperature,
        f"{r}.top_p": g.top_p,
        f"{r}.top_k": g.top_k if g.top_k > 0 else -1,
        "reward.custom_reward_function.path": reward_path,
        "reward.custom_reward_function.name": "compute_score",
        "trainer.total_epochs": max(1, round(g.epochs)),
        "trainer.save_freq": cfg.run.save_steps,
        "trainer.test_freq": cfg.diagnostics.eval_every or -1,
        "trainer.project_name": "tooltune",
        "trainer.experiment_name": cfg.name or "run",
        "trainer.default_local_dir": f"{cfg.run.output_dir}/verl",
        "trainer.logger": ["console", *cfg.run.report_to],
    }
    if g.max_steps > 0:
        out["trainer.total_training_steps"] = g.max_steps
    if cfg.downsample.enabled and cfg.downsample.drop_zero_variance:
        out["algorithm.filter_groups.enable"] = True
        out["algorithm.filter_groups.metric"] = "reward"  # DAPO refills the dropped groups with new prompts
    return out


def reward_env(cfg: TrainConfig) -> dict[str, str]:
    """TOOLTUNE_REWARD for `compute_score`: the preset's reward section as JSON."""
    rc = cfg.reward
    spec = {
        "components": dict(rc.components),
        "template": rc.template or cfg.data.template,
        "format_mode": rc.format_mode,
        "require_format": rc.require_format,
        "params": dict(rc.params),
    }
    return {"TOOLTUNE_REWARD": json.dumps(spec, sort_keys=True)}


def launch_settings(config_path: str | Path) -> dict[str, Any]:
    """The content of configs/verl/<name>.yaml for a tooltune preset."""
    cfg = load_config(config_path)
    return {"source": str(config_path), "env": reward_env(cfg), "overrides": verl_overrides(cfg)}


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, list):
        return "[" + ",".join(f"'{x}'" for x in v) + "]"
    return str(v)


def launch_command(
    settings: dict[str, Any],
    train_files: str,
    val_files: str,
    nnodes: int = 1,
    gpus_per_node: int = 8,
    extra: list[str] | None = None,
) -> str:
    """Shell command line for `python3 -m verl.trainer.main_ppo` with these settings."""
    overrides = dict(settings["overrides"])
    overrides.update(
        {
            "data.train_files": train_files,
            "data.val_files": val_files,
            "trainer.nnodes": nnodes,
            "trainer.n_gpus_per_node": gpus_per_node,
        }
    )
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in settings.get("env", {}).items())
    args = [shlex.quote(f"{k}={_value(v)}") for k, v in overrides.items()] + list(extra or [])
    return f"{env} python3 -m {VERL_ENTRY} " + " \\\n    ".join(args)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tooltune.training.verl_launch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("settings", help="configs/verl/<name>.yaml, or a tooltune preset configs/<name>.yaml")
    p.add_argument("--train-files", default="data/train.parquet")
    p.add_argument("--val-files", default="data/val.parquet")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    p.add_argument("--write", metavar="OUT", help="write the launch settings YAML for a tooltune preset")
    args, extra = p.parse_known_args(argv)
    data = yaml.safe_load(Path(args.settings).read_text(encoding="utf-8"))
    settings = data if "overrides" in data else launch_settings(args.settings)
    if args.write:
        write_settings(args.settings, args.write)
        print(f"wrote {args.write}")
        return 0
    print(launch_command(settings, args.train_files, args.val_files, args.nnodes, args.gpus, extra))
    return 0


def write_settings(config_path: str | Path, out: str | Path) -> None:
    name = Path(config_path).stem
    header = (
        f"# verl 0.9.1 launch settings for configs/{name}.yaml (the same recipe on verl).\n"
        f"# Generated: python -m tooltune.training.verl_launch configs/{name}.yaml --write {out}\n"
        f"# Launch:    python -m tooltune.training.verl_launch {out} --train-files F --nnodes N --gpus G\n"
    )
    body = yaml.safe_dump(launch_settings(config_path), sort_keys=False, width=200)
    Path(out).write_text(header + body, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
