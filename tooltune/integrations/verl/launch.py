"""verl launch settings from a tooltune training config (verl 0.9.1 `verl.trainer.main_ppo` overrides).

verl is the engine the papers trained with; it is an optional extra (it pins transformers < 5.11, so
it lives in its own environment). The flow on a cluster:

    tooltune data export --format verl ...            # parquet: data_source, prompt, ability,
                                                      # reward_model {style, ground_truth}, extra_info
    python -m tooltune.integrations.verl.launch configs/verl/efficient_single_turn.yaml \\
        --train-files data/train.parquet --val-files data/val.parquet --nnodes 2 --gpus 8

which prints `TOOLTUNE_REWARD=... python3 -m verl.trainer.main_ppo key=value ...`. The settings file is
written from a tooltune preset (any `--section.key value` overrides applied) by
`tooltune train --config configs/efficient_single_turn.yaml --verl-settings OUT`: the functions here take
the loaded training config, which lives a layer above (`tooltune.training.config`). Rewards come from
`tooltune.integrations.verl.reward:compute_score` (reward.custom_reward_function) with the preset's reward
composition passed in the TOOLTUNE_REWARD environment variable.

Online pre-rollout filtering and max-variance down-sampling are TRL-only: verl has neither, and
tooltune does not plug them into verl. A preset that enables them gets a verl file with the same
hyper-parameters and without the techniques (its `trl_only` field names them, and the printed command
is preceded by a note on stderr). `downsample.drop_zero_variance` maps to verl's DAPO group filter
(which, unlike tooltune, refills the batch with fresh prompts).

Every verl file sets `actor.use_dynamic_bsz=True` (token-budget micro-batches for the actor, reference
and rollout log-prob passes, as the Tool-N1 authors' verl script does): verl's `validate_config` refuses
a config with neither dynamic batch sizes nor micro-batch sizes. Prompts longer than
`data.max_prompt_length` are dropped when the data is loaded (`data.filter_overlong_prompts=True`, what
the Tool-N1 authors' verl did): verl 0.9.1 otherwise left-truncates them in the rollout, cutting the
system prompt that lists the tools.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

from tooltune.config import ConfigError

VERL_ENTRY = "verl.trainer.main_ppo"
REWARD_PATH = "tooltune/integrations/verl/reward.py"
"""Where verl loads `compute_score` from (`reward.custom_reward_function.path`, relative to the checkout)."""
# TRL loss_type -> verl actor.loss_agg_mode
LOSS_AGG = {
    "dapo": "token-mean",
    "bnpo": "token-mean",
    "grpo": "seq-mean-token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
}
# verl's default `data.max_prompt_length` stand-in when a preset sets no `data.max_prompt_tokens`, and
# verl's default per-GPU token budget for dynamic batch sizes (raised to fit one whole sequence).
DEFAULT_MAX_PROMPT_LENGTH = 2048
DEFAULT_MAX_TOKEN_LEN_PER_GPU = 16384
# Settings from a paper's own verl launch script that no tooltune config key expresses, by preset name.
AUTHORS_SCRIPT_OVERRIDES: dict[str, dict[str, Any]] = {
    # Tool-N1 authors' verl script: actor_rollout_ref.actor.ppo_max_token_len_per_gpu=30720
    "tool_n1": {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 30720},
}
# Preset sections verl does not carry (TRL-only techniques) -> what they are.
TRL_ONLY = {"filter": "online pre-rollout filtering", "downsample": "max-variance rollout down-sampling"}
TRL_ONLY_NOTE = "TRL-only, not in this verl run (it trains on every prompt and every rollout)"


def verl_overrides(cfg: Any, reward_path: str = REWARD_PATH) -> dict[str, Any]:
    """The recipe of `cfg` (a loaded `tooltune.training.config.TrainConfig`) as verl hydra overrides
    (dotted key -> value); data files and cluster size come later."""
    g, d = cfg.grpo, cfg.data
    if g.loss_type not in LOSS_AGG:
        raise ConfigError(
            f"grpo.loss_type: {g.loss_type!r} has no verl equivalent; choose one of {sorted(LOSS_AGG)}"
        )
    a, r = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
    prompt_len = d.max_prompt_tokens or DEFAULT_MAX_PROMPT_LENGTH
    out: dict[str, Any] = {
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": g.scale_rewards != "none",
        # KL is a loss term (Tool-N1: k3 estimator), not a reward penalty
        "algorithm.use_kl_in_reward": False,
        "data.train_batch_size": g.prompts_per_step,
        "data.max_prompt_length": prompt_len,
        "data.max_response_length": g.max_completion_length,
        "data.filter_overlong_prompts": True,  # drop, do not left-truncate, prompts over the limit
        "actor_rollout_ref.model.path": cfg.model.name_or_path,
        f"{a}.optim.lr": g.learning_rate,
        f"{a}.optim.weight_decay": g.weight_decay,
        f"{a}.optim.lr_warmup_steps_ratio": g.warmup_ratio,
        f"{a}.ppo_mini_batch_size": g.prompts_per_update or g.prompts_per_step,
        f"{a}.ppo_epochs": g.num_iterations,
        f"{a}.use_dynamic_bsz": True,
        f"{a}.ppo_max_token_len_per_gpu": max(
            DEFAULT_MAX_TOKEN_LEN_PER_GPU, prompt_len + g.max_completion_length
        ),
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
    out.update(AUTHORS_SCRIPT_OVERRIDES.get(cfg.name, {}))
    return out


def trl_only(cfg: Any) -> list[str]:
    """The TRL-only techniques (`TRL_ONLY` keys) this preset enables: its verl launch does not carry them."""
    return [key for key in TRL_ONLY if getattr(cfg, key).enabled]


def reward_env(cfg: Any) -> dict[str, str]:
    """TOOLTUNE_REWARD for `compute_score`: the preset's reward section as JSON."""
    rc = cfg.reward
    spec = {
        "components": dict(rc.components),
        "template": cfg.reward_template(),
        "format_mode": rc.format_mode,
        "require_format": rc.require_format,
        "params": dict(rc.params),
    }
    return {"TOOLTUNE_REWARD": json.dumps(spec, sort_keys=True)}


def launch_settings(cfg: Any, config_path: str | Path) -> dict[str, Any]:
    """The content of configs/verl/<name>.yaml for the tooltune preset at `config_path`, loaded as `cfg`."""
    if cfg.agentic.enabled:
        raise ConfigError(
            f"{config_path}: agentic.enabled: agentic episodes run on TRL only (tooltune's environments and "
            "episode loop are not wired into verl's agent loop); train this preset with `tooltune train`"
        )
    settings: dict[str, Any] = {"source": str(config_path)}
    if trl_only(cfg):
        settings["trl_only"] = trl_only(cfg)
    settings.update(env=reward_env(cfg), overrides=verl_overrides(cfg))
    return settings


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
        prog="python -m tooltune.integrations.verl.launch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("settings", help="verl launch settings, configs/verl/<name>.yaml")
    p.add_argument("--train-files", default="data/train.parquet")
    p.add_argument("--val-files", default="data/val.parquet")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    args, extra = p.parse_known_args(argv)
    settings = yaml.safe_load(Path(args.settings).read_text(encoding="utf-8"))
    if not isinstance(settings, dict) or "overrides" not in settings:
        out = f"configs/verl/{Path(args.settings).name}"
        write = f"tooltune train --config {args.settings} --verl-settings {out}"
        raise ConfigError(f"{args.settings}: not verl launch settings (no 'overrides'); for a tooltune "
                          f"preset write them first: {write}")
    if settings.get("trl_only"):
        names = ", ".join(TRL_ONLY.get(k, k) for k in settings["trl_only"])
        print(f"note: {names}: {TRL_ONLY_NOTE}", file=sys.stderr)
    print(launch_command(settings, args.train_files, args.val_files, args.nnodes, args.gpus, extra))
    return 0


def write_settings(cfg: Any, config_path: str | Path, out: str | Path) -> None:
    """Write `launch_settings` of the preset at `config_path` (loaded as `cfg`) to `out`, with a header
    saying how it was made, how to launch it and what it leaves out."""
    name = Path(config_path).stem
    settings = launch_settings(cfg, config_path)
    if settings.get("trl_only"):
        names = " and ".join(TRL_ONLY[k] for k in settings["trl_only"])
        header = (
            f"# verl 0.9.1 launch settings for configs/{name}.yaml WITHOUT its {names}.\n"
            "# Pre-rollout filtering and down-sampling are TRL-only: verl has neither and tooltune does\n"
            "# not add them to it, so this is the preset's hyper-parameters on every prompt and rollout.\n"
        )
    else:
        header = f"# verl 0.9.1 launch settings for configs/{name}.yaml (the same recipe on verl).\n"
    header += (
        f"# Generated: tooltune train --config configs/{name}.yaml --verl-settings {out}\n"
        f"# Launch:    python -m tooltune.integrations.verl.launch {out} --train-files F --nnodes N --gpus G\n"  # noqa: E501
        "# Checked:   make verl-check (verl's own config defaults + validate_config, reward path on CPU)\n"
    )
    body = yaml.safe_dump(settings, sort_keys=False, width=200)
    Path(out).write_text(header + body, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
