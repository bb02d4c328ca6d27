"""The examples of docs/integrations.md, run: tooltune's trainer route (its commands at test size), the
TRL scripts on the synthetic tasks and on the MCP notes server (model name, task file and GRPOConfig
swapped for test-size ones), the one-line chat-template fix, and the `tooltune` commands of the verl
example write the files its verl command names. (scripts/verl_check.py composes that verl command's
overrides with verl's own config.)"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tooltune.cli import main
from tooltune.data.synthetic.chain_tasks import generate_chain_tasks
from tooltune.schema import write_jsonl

DOC = Path(__file__).resolve().parents[1] / "docs" / "integrations.md"


def blocks(language: str) -> list[str]:
    """The doc's fenced code blocks in `language`."""
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def substituted(code: str, swaps: dict[str, str]) -> str:
    for old, new in swaps.items():
        assert old in code, f"docs/integrations.md no longer holds {old!r}: update this test"
        code = code.replace(old, new)
    return code


def commands(marker: str) -> list[list[str]]:
    """The commands of the doc's bash block holding `marker`, each as argv (continuation lines joined)."""
    block = next(b for b in blocks("bash") if marker in b)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def verl_commands() -> list[list[str]]:
    """The verl example's commands."""
    return commands("verl.trainer.main_ppo")


def trl_model(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """The tiny model with a chat template TRL reads tool calls of (the doc's one-line fix, saved)."""
    from transformers import AutoTokenizer  # deferred: heavy

    from tooltune.integrations.trl import trl_chat_template

    model = tmp_path / "model"
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = trl_chat_template("qwen2_5")
    tok.save_pretrained(model)
    for f in tiny_model_dir.iterdir():
        if not (model / f.name).exists():
            (model / f.name).symlink_to(f)
    return model


TEST_SIZE_GRPO = ('per_device_train_batch_size=2, num_generations=2, use_cpu=True, bf16=False, '
                  'gradient_checkpointing=False, report_to="none", save_strategy="no")')


def test_the_trl_example_trains(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("trl")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model = trl_model(tiny_model_dir, tmp_path)
    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(generate_chain_tasks(2, seed=0, split="train"), str(tasks))
    code = substituted(blocks("python")[0], {
        '"Qwen/Qwen2.5-0.5B-Instruct"': repr(str(model)),
        '"tasks.jsonl"': repr(str(tasks)),
        'GRPOConfig(output_dir="runs/bfcl-env", max_completion_length=512, max_steps=200)':
            f'GRPOConfig(output_dir={str(tmp_path / "out")!r}, max_completion_length=8, max_steps=1, '
            + TEST_SIZE_GRPO,
    })
    namespace: dict[str, Any] = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # the documentation's own code, not model output
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 1
    assert any("rewards/SyntheticChainEnvironment/mean" in h for h in trainer.state.log_history)


def test_the_verl_example_writes_what_its_verl_command_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture):
    pytest.importorskip("pyarrow")
    monkeypatch.chdir(tmp_path)
    commands = verl_commands()
    assert [c[:3] for c in commands[:2]] == [["tooltune", "data", "tasks"], ["tooltune", "data", "export"]]
    for argv in commands[:2]:
        argv = [a if a != "1000" else "3" for a in argv[1:]]  # test size
        assert main(argv) == 0
    assert "wrote verl's tool config to data/verl/tasks.tools.yaml" in capsys.readouterr().out
    verl = dict(a.split("=", 1) for a in commands[2] if "=" in a)
    for key in ("data.train_files", "actor_rollout_ref.rollout.multi_turn.tool_config_path"):
        assert (tmp_path / verl[key]).is_file(), key
    reward = Path(__file__).resolve().parents[1] / verl["reward.custom_reward_function.path"]
    assert f"def {verl['reward.custom_reward_function.name']}(" in reward.read_text(encoding="utf-8")


def test_the_trl_mcp_example_trains_on_the_notes_server(tiny_model_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("trl")
    pytest.importorskip("mcp")
    from tooltune.data.mcp_tasks import task_from_record
    from tooltune.environments.mcp.client import close_all
    from tooltune.environments.mcp.data import McpServer
    from tooltune.integrations.trl import mcp_environment_class

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    notes = f"{shlex.quote(sys.executable)} -m tooltune.environments.mcp.notes"
    add = {"name": "add_note", "arguments": {"title": "groceries", "text": "milk"}}
    record = {"id": "notes-1", "prompt": "Save a note titled groceries that says milk",
              "check": {"kind": "calls", "calls": [add]}}
    tasks = tmp_path / "notes_tasks.jsonl"
    tools = mcp_environment_class(notes, exclude=["reset_notes"]).tool_specs
    write_jsonl([task_from_record(record, McpServer.parse(notes), tools)] * 2, str(tasks))
    code = substituted(blocks("python")[1], {
        '"Qwen/Qwen2.5-0.5B-Instruct"': repr(str(trl_model(tiny_model_dir, tmp_path))),
        '"python -m tooltune.environments.mcp.notes"': repr(notes),
        '"notes_tasks.jsonl"': repr(str(tasks)),
        'GRPOConfig(output_dir="runs/notes-env", max_completion_length=512, max_steps=200)':
            f'GRPOConfig(output_dir={str(tmp_path / "out")!r}, max_completion_length=8, max_steps=1, '
            + TEST_SIZE_GRPO,
    })
    namespace: dict[str, Any] = {}
    try:
        exec(compile(code, str(DOC), "exec"), namespace)  # the documentation's own code, not model output
    finally:
        close_all()
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 1
    assert any("rewards/McpEnvironment/mean" in h for h in trainer.state.log_history)


def test_the_one_line_chat_template_fix_is_what_trl_reads(tiny_model_dir: Path):
    pytest.importorskip("trl")
    from transformers import AutoTokenizer  # deferred: heavy

    from tooltune.config import ConfigError
    from tooltune.integrations.trl import check_chat_template

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    line = blocks("python")[2]
    with pytest.raises(ConfigError, match="trl_chat_template"):
        check_chat_template(tokenizer)
    exec(compile(line, str(DOC), "exec"), {"tokenizer": tokenizer})  # the documentation's own line
    check_chat_template(tokenizer)


def test_the_tooltune_trainer_route_trains_on_the_tasks_it_writes(tiny_model_dir: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("trl")
    monkeypatch.chdir(tmp_path)
    data, train = commands("tooltune train")[:2], commands("tooltune train")[2]
    for argv in data:
        assert main([a if a not in ("1000", "100") else "2" for a in argv[1:]]) == 0  # test size
    assert train[:4] == ["tooltune", "train", "--config", "configs/agentic.yaml"]
    preset = str(Path(__file__).resolve().parents[1] / "configs" / "agentic.yaml")
    argv = [a if a != "Qwen/Qwen2.5-0.5B-Instruct" else str(tiny_model_dir) for a in train[1:]]
    argv[argv.index("configs/agentic.yaml")] = preset
    test_size = {"run.device": "cpu", "model.dtype": "float32", "grpo.max_steps": "1",
                 "grpo.num_generations": "2", "grpo.prompts_per_step": "1", "grpo.per_device_batch_size": "2",
                 "grpo.max_completion_length": "8", "agentic.max_turns": "1", "diagnostics.eval_samples": "0",
                 "downsample.enabled": "false", "run.save_steps": "1000"}
    for key, value in test_size.items():
        argv += [f"--{key}", value]
    assert main(argv) == 0
    metrics = (tmp_path / "runs/chain-agentic/metrics.jsonl").read_text().splitlines()
    assert any("tooltune/agentic_turns" in json.loads(line) for line in metrics)
