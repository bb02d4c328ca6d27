"""Training config: presets, overrides, errors naming the key, translation to TRL configs, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooltune.training.config import (
    ConfigError,
    TrainConfig,
    describe,
    dump_config,
    load_config,
    parse_overrides,
)

REPO = Path(__file__).resolve().parents[1]
PRESETS = sorted(p for p in (REPO / "configs").glob("*.yaml") if not p.stem.startswith("quickstart"))
"""The `tooltune train` presets (configs/quickstart*.yaml configure `tooltune quickstart` instead)."""


def test_every_preset_loads_and_validates() -> None:
    names = {p.stem for p in PRESETS}
    assert {"tool_n1", "efficient_single_turn", "efficient_multi_turn", "r2if"} <= names
    for path in PRESETS:
        cfg = load_config(path)
        assert cfg.name == path.stem


def test_presets_carry_the_papers_numbers() -> None:
    n1 = load_config(REPO / "configs/tool_n1.yaml")
    assert (
        n1.grpo.prompts_per_step,
        n1.grpo.learning_rate,
        n1.grpo.temperature,
        n1.grpo.beta,
        n1.grpo.entropy_coef,
        n1.grpo.num_generations,
    ) == (1024, 1e-6, 0.7, 1e-3, 0.0, 5)
    st = load_config(REPO / "configs/efficient_single_turn.yaml")
    assert (
        st.grpo.prompts_per_step,
        st.grpo.epochs,
        st.grpo.num_generations,
        st.grpo.epsilon,
        st.grpo.epsilon_high,
        st.grpo.beta,
        st.filter.k,
        st.downsample.m,
    ) == (128, 10, 8, 0.2, 0.28, 0.0, 1, 4)
    mt = load_config(REPO / "configs/efficient_multi_turn.yaml")
    assert (
        mt.grpo.prompts_per_step,
        mt.grpo.epochs,
        mt.grpo.temperature,
        mt.grpo.num_generations,
        mt.downsample.m,
        mt.data.max_prompt_tokens,
        mt.reward.require_format,
    ) == (256, 4, 1.0, 16, 8, 4096, False)
    r2 = load_config(REPO / "configs/r2if.yaml")
    assert r2.sft.enabled and r2.reward.components == {"binary": 3.0, "cer": 1.0, "smv": 1.0}
    assert (
        r2.grpo.prompts_per_step,
        r2.grpo.prompts_per_update,
        r2.grpo.num_generations,
        r2.grpo.epochs,
    ) == (512, 128, 5, 9)


def test_overrides_dotted_keys_and_types() -> None:
    cfg = load_config(
        REPO / "configs/tool_n1.yaml",
        [
            "--grpo.temperature",
            "0.7",
            "--filter.enabled",
            "--downsample.m=2",
            "--reward.components",
            "{binary: 3, smv: 1}",
            "--run.report_to",
            "tensorboard",
        ],
    )
    assert cfg.grpo.temperature == 0.7 and cfg.filter.enabled and cfg.downsample.m == 2
    assert cfg.reward.components == {"binary": 3, "smv": 1} and cfg.run.report_to == ["tensorboard"]
    assert parse_overrides(["--grpo.max-steps", "3"]) == {"grpo.max_steps": "3"}
    negated = load_config(REPO / "configs/tool_n1.yaml", ["--filter.enabled", "--no-run.bf16"])
    assert negated.filter.enabled and negated.run.bf16 is False  # --no-<bool key> sets it false


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"grpo.tempreature": 1},
         r"grpo.tempreature: unknown key \(did you mean temperature\?\); allowed keys: .*temperature"),
        ({"grpo.loss_type": "ppo"}, "grpo.loss_type: 'ppo' is not allowed; choose one of grpo, bnpo"),
        ({"grpo.num_generations": "many"}, "grpo.num_generations: expected int"),
        ({"grpo.num_generations": 2.5}, "grpo.num_generations: expected an integer"),
        ({"filter.enabled": "maybe"}, "filter.enabled: expected true or false"),
        (
            {"downsample.enabled": True, "downsample.m": 9},
            r"downsample.m: must be in 1..grpo.num_generations \(8\)",
        ),
        ({"grpo": 3}, "grpo: is a section"),
        ({"data.history": "flat"}, "data.history: 'flat' is not allowed; choose one of messages, context"),
        ({"grpo.warmup_ratio": 1.5}, r"grpo.warmup_ratio: must be in \[0, 1\)"),
        ({"grpo.prompts_per_update": 5}, "grpo.prompts_per_update: must divide"),
        ({"sft.target": "gold"}, "sft.target: must be 'answer' or 'meta.<key>'"),
        ({"nope.x": 1}, "nope: unknown key"),
        ({"no_run.bf16": "false"}, r"no_run.bf16: takes no value \(it sets run.bf16 to false\)"),
    ],
)
def test_config_errors_name_the_key(override: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, override)


def test_yaml_errors_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo:\n  epsilon_hgh: 0.28\n")
    with pytest.raises(ConfigError, match="grpo.epsilon_hgh: unknown key"):
        load_config(bad)
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "missing.yaml")


def test_dump_roundtrip_and_help(tmp_path: Path) -> None:
    cfg = load_config(REPO / "configs/efficient_single_turn.yaml", {"grpo.top_k": 5})
    dump_config(cfg, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml") == cfg
    rows = {key: help_ for key, _, help_ in describe()}
    assert "Choices: grpo, bnpo" in rows["grpo.loss_type"] and rows["filter.k"]
    assert all(help_ for help_ in rows.values())


def test_translation_to_trl_configs() -> None:
    from tooltune.training.grpo_stage import grpo_args
    from tooltune.training.sft import sft_args

    cfg = load_config(REPO / "configs/r2if.yaml")
    args = grpo_args(cfg, "/tmp/x", cpu=True)
    assert args.use_cpu and not args.bf16 and not args.gradient_checkpointing
    # batch 512 prompts x 5 rollouts per generation; mini-batch 128 x 5 per optimizer step
    assert args.generation_batch_size == 512 * 5
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 128 * 5
    assert (args.temperature, args.beta, args.epsilon, args.num_generations, args.loss_type) == (
        0.7,
        1e-3,
        0.2,
        5,
        "grpo",
    )
    st = load_config(REPO / "configs/efficient_single_turn.yaml")
    a2 = grpo_args(st, "/tmp/x", cpu=True)
    assert a2.epsilon_high == 0.28 and a2.num_train_epochs == 10 and a2.steps_per_generation == 128
    with pytest.raises(ConfigError, match="grpo.per_device_batch_size"):
        grpo_args(st, "/tmp/x", cpu=True, processes=3)
    s = sft_args(cfg, "/tmp/x", on_cpu=True)
    assert s.completion_only_loss and s.use_cpu and s.learning_rate == 1e-5


def test_cli_reports_config_errors(capsys: pytest.CaptureFixture) -> None:
    from tooltune.cli import main

    assert main(["train", "--config", str(REPO / "configs/tool_n1.yaml"), "--grpo.loss_type", "x"]) == 2
    assert "grpo.loss_type: 'x' is not allowed" in capsys.readouterr().err
    assert (
        main(
            [
                "train",
                "--config",
                str(REPO / "configs/tool_n1.yaml"),
                "--show-config",
                "--grpo.temperature",
                "0.5",
            ]
        )
        == 0
    )
    assert "temperature: 0.5" in capsys.readouterr().out


def test_defaults_are_valid() -> None:
    assert TrainConfig().validate().grpo.loss_type == "dapo"


def test_cli_names_missing_data_and_model(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tooltune.cli import main

    args = ["train", "--model.name_or_path", str(tmp_path / "nope"), "--run.output_dir", str(tmp_path / "r")]
    assert main([*args, "--data.train", str(tmp_path / "missing.jsonl")]) == 2
    assert "data.train: file not found" in capsys.readouterr().err
    data = tmp_path / "train.jsonl"
    data.write_text(
        json.dumps(
            {
                "id": "a",
                "source": "t",
                "category": "simple",
                "tools": [],
                "answer": [],
                "messages": [{"role": "user", "content": "x"}],
            }
        )
        + "\n"
    )
    assert main([*args, "--data.train", str(data), "--data.template", "nonesuch"]) == 2
    assert "data.template: unknown template 'nonesuch'; registered:" in capsys.readouterr().err
    assert main([*args, "--data.train", str(data), "--reward.components", "{binary: 1}"]) == 2
    assert "model.name_or_path: model folder not found: " in capsys.readouterr().err


# ------------------------------------------------------------------------------------ user mistakes


def _train_line(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    from test_cli import one_error_line

    from tooltune.cli import main

    assert main(["train", *argv]) == 2
    return one_error_line(capsys)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--grpo.learning_rate", "-1.0"], "grpo.learning_rate: must be > 0, got -1.0"),
        (["--sft.learning_rate", "0"], "sft.learning_rate: must be > 0, got 0.0"),
        (["--grpo.temperature", "-1"], "grpo.temperature: must be > 0, got -1.0"),
        (["--grpo.temperature", "0"], "grpo.temperature: must be > 0, got 0.0"),
        (["--grpo.max_steps", "-5"], "grpo.max_steps: must be -1 or >= 1, got -5"),
        (["--sft.max_steps", "0"], "sft.max_steps: must be -1 or >= 1, got 0"),
        (["--grpo.epochs", "0"], "grpo.epochs: must be > 0, got 0.0"),
        (["--grpo.top_p", "1.5"], "grpo.top_p: must be in (0, 1], got 1.5"),
        (["--grpo.learning_rate", "abc"], "grpo.learning_rate: expected float, got 'abc'"),
        (["--sft.enabled", "--reward.components", "{binry: 1}"],
         "reward.components: unknown reward 'binry' (did you mean binary?); registered: binary, cer"),
        (["--reward.params", "{binary: {tau: 0.3}}"], "reward 'binary' takes no parameter(s) ['tau']"),
        (["--reward.components", "{binary: 3, cer: 1}"], "CERReward needs a student"),
        (["--reward.components", "{binary: heavy}"], "reward.components.binary: the weight must be a number"),
        (["--reward.components", "{format: 1}", "--no-reward.require_format"],
         "parameter(s) ['require_format'] are taken by none of the components ['format']"),
        (["--reward.template", "r2iff"], "reward.template: unknown template 'r2iff' (did you mean r2if?)"),
        (["--data.template", "tool_n2"], "data.template: unknown template 'tool_n2' (did you mean tool_n1"),
        (["--data.system_prompt", "bfcl_strng"],
         "data.system_prompt: 'bfcl_strng' is not a template name (did you mean bfcl_strong?)"),
    ],
)
def test_cli_refuses_values_and_names_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture, overrides: list[str], message: str
) -> None:
    # neither the model nor the data exist: the values and names are checked first
    run_dir = tmp_path / "run"
    args = ["--model.name_or_path", str(tmp_path / "nope"), "--data.train", str(tmp_path / "missing.jsonl"),
            "--run.output_dir", str(run_dir), *overrides]
    assert message in _train_line(args, capsys)
    assert not run_dir.exists()


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"id": "a", "source": "t", "category": "simple", "tools": [], "answer": [],
                                "messages": [{"role": "user", "content": "x"}]}) + "\n")
    return data


def test_cli_refuses_missing_files_and_unwritable_run_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data, model = _data(tmp_path), tmp_path / "model"
    model.mkdir()
    base = ["--model.name_or_path", str(model), "--data.train", str(data)]
    line = _train_line([*base, "--data.val", str(tmp_path / "val.jsonl")], capsys)
    assert line == f"tooltune train: data.val: file not found: {tmp_path / 'val.jsonl'}"
    assert "model.name_or_path: required" in _train_line(["--data.train", str(data)], capsys)
    (tmp_path / "some_file.txt").write_text("x")
    out = tmp_path / "some_file.txt" / "run"
    line = _train_line([*base, "--run.output_dir", str(out)], capsys)
    blocker = tmp_path / "some_file.txt"
    assert line == f"tooltune train: run.output_dir {out}: {blocker} is a file, not a folder"
    if Path("/proc/self").is_dir():
        line = _train_line([*base, "--run.output_dir", "/proc/x/run"], capsys)
        assert line.startswith("tooltune train: run.output_dir /proc/x/run: cannot write there (")


def test_cli_names_a_binary_training_file_by_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(255, -1, -1)) * 16)
    line = _train_line(["--model.name_or_path", str(tmp_path), "--data.train", str(garbage),
                        "--run.output_dir", str(tmp_path / "run")], capsys)
    assert f"{garbage}:1: not valid UTF-8" in line


def test_show_config_needs_no_files_and_help_shows_ranges(capsys: pytest.CaptureFixture) -> None:
    from tooltune.cli import main

    assert main(["train", "--config", str(REPO / "configs/r2if.yaml"), "--show-config"]) == 0  # data absent
    rows = {key: help_ for key, _, help_ in describe()}
    assert rows["grpo.learning_rate"].endswith("Must be > 0.")
    assert rows["grpo.max_steps"].endswith("Must be -1 or >= 1.")
    assert rows["sft.warmup_ratio"].endswith("Must be in [0, 1).")


def test_system_prompt_is_text_a_file_or_a_template_name(tmp_path: Path) -> None:
    from tooltune.prompts import TEMPLATES
    from tooltune.training.config import resolve_system_prompt

    prompt = tmp_path / "system.txt"
    prompt.write_text("Call the tools.\n{tools}")
    assert resolve_system_prompt(str(prompt)) == "Call the tools.\n{tools}"
    assert resolve_system_prompt("bfcl_strong") == TEMPLATES["bfcl_strong"].system
    assert resolve_system_prompt("You call tools: {tools}") == "You call tools: {tools}"
    assert resolve_system_prompt("") == ""
    with pytest.raises(ConfigError, match="data.system_prompt: 'tool_n2' is not a template name"):
        resolve_system_prompt("tool_n2")
    assert load_config(None, {"data.system_prompt": str(prompt)}).data.system_prompt == str(prompt)


def test_cli_hands_train_the_config_as_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`tooltune train` leaves the checks and the run folder to `train`, which does each once."""
    from tooltune.cli import main
    from tooltune.training import runner

    seen = []
    monkeypatch.setattr(runner, "train", lambda cfg, resume=False: seen.append(cfg) or tmp_path / "run")
    monkeypatch.setattr(runner, "shutdown_processes", lambda: None)
    args = ["train", "--model.name_or_path", str(tmp_path), "--data.train", str(_data(tmp_path)),
            "--run.output_dir", str(tmp_path / "runs" / "new"), "--data.system_prompt", "bfcl_strong"]
    assert main(args) == 0
    assert seen[0].data.system_prompt == "bfcl_strong"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", ["quickstart.yaml", "quickstart_mini.yaml"])
def test_a_quickstart_config_is_refused_naming_the_command_that_takes_it(
    name: str, capsys: pytest.CaptureFixture
) -> None:
    path = REPO / "configs" / name
    line = _train_line(["--config", str(path)], capsys)
    assert line.startswith(f"tooltune train: config: {path} is a quickstart config (keys ")
    assert f"run it with `tooltune quickstart --config {path}`" in line and "unknown key" not in line


def test_relative_paths_in_a_config_are_read_from_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    preset = REPO / "configs" / "efficient_single_turn.yaml"
    monkeypatch.chdir(tmp_path)
    line = _train_line(["--config", str(preset), "--run.output_dir", str(tmp_path / "run")], capsys)
    assert line == (f"tooltune train: data.train: file not found: data/single_turn/train.jsonl (looked for "
                    f"in the working folder {tmp_path}: relative paths in a config are read from where "
                    "tooltune runs, not from the config file's folder; docs/data.md, 'Training data for the "
                    "presets', says how to make the presets' files)")
    (tmp_path / "data" / "single_turn").mkdir(parents=True)
    for split in ("train", "val"):
        _data(tmp_path).rename(tmp_path / "data" / "single_turn" / f"{split}.jsonl")
    cfg = load_config(preset).check_data_files()  # found beside the working folder, not beside the preset
    assert Path(cfg.data.train).resolve() == tmp_path / "data" / "single_turn" / "train.jsonl"


def test_the_python_api_example_of_the_training_docs_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    import ast
    import re

    text = (REPO / "docs" / "training.md").read_text()
    block = re.search(r"## Python API\n\n```python\n(.*?)```", text, re.S).group(1)
    (call,) = [n for n in ast.walk(ast.parse(block))
               if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_config"]
    args = [ast.literal_eval(a) for a in call.args]
    assert "from tooltune.training.config import load_config" in block
    monkeypatch.chdir(REPO)  # the docs' paths are relative to the repository root
    cfg = load_config(*args)
    assert cfg.grpo.max_steps == 40 and cfg.run.output_dir == "runs/x"


@pytest.mark.parametrize("preset", sorted((REPO / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_the_commands_a_preset_cites_exist(preset: Path) -> None:
    import re
    import shlex

    from tooltune.cli import build_parser

    lines = preset.read_text().splitlines()
    comments = " ".join(line.split("#", 1)[1].strip() for line in lines if "#" in line)
    for command in re.findall(r"`tooltune ([^`]+)`", comments):
        try:
            build_parser().parse_args(shlex.split(command))
        except SystemExit as exc:
            pytest.fail(f"{preset.name} cites `tooltune {command}`, which the command line refuses ({exc})")


def test_the_training_docs_list_every_mcp_key_with_its_default() -> None:
    import dataclasses
    import re

    from tooltune.environments.mcp import McpSettings

    text = (REPO / "docs" / "training.md").read_text()
    listed = dict(re.findall(r"^\| `mcp\.(\w+)` \| ([^|]+) \|", text, re.M))
    fields = {f.name: f.default for f in dataclasses.fields(McpSettings)}
    assert set(listed) == set(fields)
    for name, default in fields.items():
        shown = json.dumps(default) if isinstance(default, str) else str(default)
        assert listed[name].strip() == shown, name
    assert load_config(None, {"mcp.call_seconds": 30}).mcp.call_seconds == 30.0  # a key of `tooltune train`


def test_an_unknown_agentic_environment_names_the_key_and_the_closest() -> None:
    from tooltune.config import UnknownName

    over = {"agentic.enabled": True, "agentic.environment": "bfc", "reward.components": {"outcome": 1.0}}
    why = r"^agentic.environment: unknown environment 'bfc' \(did you mean bfcl\?\)"
    with pytest.raises(UnknownName, match=why):
        load_config(None, over)


def test_the_mcp_section_is_what_the_mcp_environment_is_built_with() -> None:
    from tooltune.environments import make_environment

    cfg = load_config(None, {"mcp.call_seconds": 30, "mcp.result_chars": 300})
    env = make_environment("mcp", cfg.environment_settings())
    assert (env.settings.call_seconds, env.settings.result_chars) == (30.0, 300)
