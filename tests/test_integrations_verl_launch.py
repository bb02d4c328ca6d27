"""Presets and their verl launch settings.

Presets: every number in a paper preset says where it comes from (paper, authors' script, our choice);
the recipes' numbers. verl settings: in sync with the presets, valid verl 0.9.1 keys, compute_score
loaded by path. verl itself is not installed here (it pins transformers < 5.11): `make verl-check`
(scripts/verl_check.py, in .venv-verl) runs verl's own config composition, `validate_config` and reward
loop on these files; this suite checks the contract: the override keys below exist in verl 0.9.1's
`verl/trainer/config/_generated_ppo_trainer.yaml`, the settings carry what `validate_config` needs, and
the reward entry point is loaded from a file path and called as verl's reward loading does.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from tooltune.integrations.verl.launch import (
    TRL_ONLY,
    VERL_ENTRY,
    launch_command,
    launch_settings,
    main,
    reward_env,
    verl_overrides,
)
from tooltune.training.config import ConfigError, load_config


def settings_of(path: str | Path) -> dict:
    """`launch_settings` of the preset at `path`, loaded as `tooltune train` loads it."""
    return launch_settings(load_config(path), path)

REPO = Path(__file__).resolve().parents[1]
PRESETS = sorted(p for p in (REPO / "configs").glob("*.yaml") if not p.stem.startswith("quickstart"))
"""The paper presets (configs/quickstart*.yaml configure `tooltune quickstart` instead)."""
TRL_ONLY_PRESETS = {"agentic"}
"""Presets whose technique exists on TRL only (agentic episodes): no verl counterpart."""
NAMES = [p.stem for p in PRESETS if p.stem not in TRL_ONLY_PRESETS]
SOURCES = ("paper", "authors' script", "our choice")

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
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.use_dynamic_bsz",
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
    fresh = settings_of(f"configs/{name}.yaml")
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
    settings = settings_of("configs/efficient_multi_turn.yaml")
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
    settings = settings_of("configs/efficient_single_turn.yaml")
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


# --- presets: where every number comes from ------------------------------------------------------


def _numbers(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    if isinstance(value, dict):
        return any(_numbers(v) for v in value.values())
    if isinstance(value, list):
        return any(_numbers(v) for v in value)
    return False


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_every_number_in_a_preset_says_where_it_comes_from(path: Path) -> None:
    cfg = load_config(path)  # and it loads and validates
    assert cfg.name == path.stem
    unsourced = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = re.match(r"^\s*[\w.]+:\s*(?P<value>[^#]*?)\s*(?:#\s*(?P<comment>.*))?$", line)
        if not m or not m["value"]:
            continue
        if _numbers(yaml.safe_load(m["value"])) and not any(s in (m["comment"] or "") for s in SOURCES):
            unsourced.append(f"{path.name}:{n}: {line.strip()}")
    assert not unsourced, "numbers without 'paper', \"authors' script\" or 'our choice':\n" + "\n".join(
        unsourced
    )
    header = path.read_text(encoding="utf-8").split("\nname:")[0]
    assert all(s in header for s in ("paper", "our choice")), "the header says what each source means"


def test_tool_n1_numbers_from_the_authors_script_are_labelled_so() -> None:
    cfg = load_config(REPO / "configs/tool_n1.yaml")
    assert (cfg.grpo.num_generations, cfg.grpo.epochs) == (5, 7)
    assert (cfg.data.max_prompt_tokens, cfg.grpo.max_completion_length) == (4096, 8192)
    assert cfg.grpo.prompts_per_update == 256  # verl's default ppo_mini_batch_size in the authors' run
    lines = {
        line.split(":")[0].strip(): line
        for line in (REPO / "configs/tool_n1.yaml").read_text().splitlines()
        if not line.lstrip().startswith("#")
    }
    for key in ("num_generations", "epochs", "max_prompt_tokens", "max_completion_length"):
        assert "authors' script" in lines[key] and "# paper" not in lines[key], lines[key]
    for key in ("prompts_per_step", "learning_rate", "temperature", "beta", "entropy_coef"):
        assert "paper:" in lines[key], lines[key]


def test_efficient_presets_techniques_and_baseline() -> None:
    st = load_config(REPO / "configs/efficient_single_turn.yaml")
    assert st.filter.enabled and not st.downsample.enabled  # App. F: down-sampling does not help single-turn
    mt = load_config(REPO / "configs/efficient_multi_turn.yaml")
    van = load_config(REPO / "configs/efficient_multi_turn_vanilla.yaml")
    assert mt.filter.enabled and mt.downsample.enabled and mt.grpo.num_generations == 16
    assert not van.filter.enabled and not van.downsample.enabled
    assert van.grpo.num_generations == mt.downsample.m == 8  # both update on 8 rollouts per prompt
    same = ("model", "data", "reward", "diagnostics")
    assert all(getattr(van, k) == getattr(mt, k) for k in same)
    assert {**vars(van.grpo), "num_generations": 16} == vars(mt.grpo)


# --- verl presets: what verl 0.9.1's validate_config needs, the authors' numbers, TRL-only notes --


@pytest.mark.parametrize("name", NAMES)
def test_verl_presets_pass_what_validate_config_checks(name: str) -> None:
    text = (REPO / "configs/verl" / f"{name}.yaml").read_text()
    o = yaml.safe_load(text)["overrides"]
    a = "actor_rollout_ref.actor"
    # without dynamic batch sizes verl 0.9.1 needs ppo_micro_batch_size(_per_gpu) and both
    # log_prob_micro_batch_size(_per_gpu); with them (ref and rollout follow the actor) it needs none
    assert o[f"{a}.use_dynamic_bsz"] is True
    assert not any("micro_batch_size" in k for k in o)
    assert o[f"{a}.ppo_max_token_len_per_gpu"] >= o["data.max_prompt_length"] + o["data.max_response_length"]
    assert o["data.train_batch_size"] >= o[f"{a}.ppo_mini_batch_size"]
    assert o["data.train_batch_size"] % o[f"{a}.ppo_mini_batch_size"] == 0
    assert o["data.filter_overlong_prompts"] is True  # drop, never left-truncate, a prompt over the limit
    assert "make verl-check" in text


def test_tool_n1_verl_preset_is_the_authors_script() -> None:
    o = yaml.safe_load((REPO / "configs/verl/tool_n1.yaml").read_text())["overrides"]
    a, r = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
    assert (o["data.max_prompt_length"], o["data.max_response_length"]) == (4096, 8192)
    assert (o["trainer.total_epochs"], o[f"{r}.n"], o["data.train_batch_size"]) == (7, 5, 1024)
    assert (o[f"{a}.use_dynamic_bsz"], o[f"{a}.ppo_max_token_len_per_gpu"]) == (True, 30720)
    assert (o[f"{a}.ppo_mini_batch_size"], o[f"{a}.optim.lr"], o[f"{r}.temperature"]) == (256, 1e-6, 0.7)
    kl = (o[f"{a}.use_kl_loss"], o[f"{a}.kl_loss_coef"], o[f"{a}.kl_loss_type"])
    assert kl == (True, 1e-3, "low_var_kl")
    assert (o[f"{a}.entropy_coeff"], o[f"{a}.clip_ratio_low"], o[f"{a}.clip_ratio_high"]) == (0, 0.2, 0.2)
    assert o[f"{a}.loss_agg_mode"] == "token-mean"
    assert (o["trainer.save_freq"], o["trainer.test_freq"]) == (10, 10)


@pytest.mark.parametrize("name", NAMES)
def test_verl_presets_say_plainly_which_techniques_they_lack(name: str) -> None:
    cfg = load_config(REPO / "configs" / f"{name}.yaml")
    text = (REPO / "configs/verl" / f"{name}.yaml").read_text()
    lacks = [k for k in TRL_ONLY if getattr(cfg, k).enabled]
    assert yaml.safe_load(text).get("trl_only", []) == lacks
    header = text.split("\nsource:")[0]
    if lacks:
        assert "TRL-only" in header and "WITHOUT" in header
        assert all(TRL_ONLY[k] in header for k in lacks)
    else:
        assert "TRL-only" not in header


def test_launch_notes_the_trl_only_techniques(capsys: pytest.CaptureFixture) -> None:
    assert main(["configs/verl/efficient_multi_turn.yaml"]) == 0
    out = capsys.readouterr()
    assert "TRL-only" in out.err and "pre-rollout filtering" in out.err and "down-sampling" in out.err
    assert out.out.startswith("TOOLTUNE_REWARD=")
    assert main(["configs/verl/efficient_multi_turn_vanilla.yaml"]) == 0
    assert capsys.readouterr().err == ""


def test_docs_state_sources_and_trl_only() -> None:
    doc = (REPO / "docs/training.md").read_text()
    presets = doc.split("## Presets")[1].split("\n## ")[0]
    n1_row = next(line for line in presets.splitlines() if line.startswith("| `tool_n1.yaml`"))
    assert "authors' script" in n1_row and "n 5" in n1_row.split("authors' script")[1]
    assert "`efficient_multi_turn_vanilla.yaml`" in presets
    verl = doc.split("\n## verl")[1]
    assert "TRL-only" in verl and "make verl-check" in verl


# --- make verl-check: its inputs, checked without verl --------------------------------------------


def test_verl_check_composes_exactly_the_printed_command() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import verl_check  # imports verl only inside its checks
    finally:
        sys.path.remove(str(REPO / "scripts"))
    settings = settings_of("configs/tool_n1.yaml")
    tokens = verl_check.overrides_of(settings, "t.parquet", "v.parquet")
    # what the shell passes: a backslash-newline only continues the line
    printed = [t for t in shlex.split(launch_command(settings, "t.parquet", "v.parquet")) if t != "\n"]
    assert tokens == printed[printed.index(VERL_ENTRY) + 1 :]
    assert len(tokens) == len(settings["overrides"]) + 4
    assert "actor_rollout_ref.actor.use_dynamic_bsz=True" in tokens
    spec, best = verl_check.reward_spec(settings_of("configs/r2if.yaml"))
    assert spec["components"] == {"binary": 3.0} and best == 3.0  # CER/SMV need models verl-check lacks


def test_verl_environment_is_pinned() -> None:
    lines = [
        line
        for line in (REPO / "requirements/verl.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[\w.+]+", line) for line in lines), lines
    pins = dict(line.lower().split("==") for line in lines)
    assert (pins["verl"], pins["torch"]) == ("0.9.1", "2.13.0")
    major, minor = map(int, pins["transformers"].split(".")[:2])
    assert (5, 5) <= (major, minor) < (5, 11)  # verl 0.9.1: transformers>=5.5.3,<5.11
    makefile = (REPO / "Makefile").read_text()
    assert "verl-check:" in makefile and "scripts/verl_check.py" in makefile
    assert "requirements/verl.txt" in makefile and ".venv-verl" in (REPO / ".gitignore").read_text()


def test_an_agentic_preset_has_no_verl_launch_and_says_why() -> None:
    assert not (REPO / "configs/verl/agentic.yaml").exists()
    with pytest.raises(ConfigError, match="agentic.enabled: agentic episodes run on TRL only"):
        settings_of(REPO / "configs/agentic.yaml")


def test_tooltune_train_writes_the_committed_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    from tooltune.cli import main as tooltune

    monkeypatch.chdir(REPO)
    out = tmp_path / "tool_n1.yaml"
    assert tooltune(["train", "--config", "configs/tool_n1.yaml", "--verl-settings", str(out)]) == 0
    assert f"wrote verl launch settings to {out}" in capsys.readouterr().out
    committed = (REPO / "configs/verl/tool_n1.yaml").read_text()
    assert out.read_text() == committed.replace("configs/verl/tool_n1.yaml", str(out))


def test_launch_refuses_a_preset_and_names_the_command_that_writes_its_settings() -> None:
    with pytest.raises(ConfigError, match=r"configs/r2if.yaml: not verl launch settings .* write them first: "
                                          r"tooltune train --config configs/r2if.yaml --verl-settings "
                                          r"configs/verl/r2if.yaml"):
        main(["configs/r2if.yaml"])
