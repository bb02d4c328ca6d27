"""The examples of docs/integrations.md, run: the TRL script trains on the tiny model (its model name,
task file and GRPOConfig swapped for test-size ones), and the `tooltune` commands of the verl example
write the files its verl command names. (scripts/verl_check.py composes that verl command's overrides
with verl's own config.)"""

from __future__ import annotations

import re
import shlex
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


def verl_commands() -> list[list[str]]:
    """The verl example's commands, each as argv (continuation lines joined)."""
    return [shlex.split(line) for line in blocks("bash")[0].replace("\\\n", " ").splitlines() if line.strip()]


def test_the_trl_example_trains(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("trl")
    import trl  # deferred: heavy
    from transformers import AutoTokenizer  # deferred: heavy

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model = tmp_path / "model"  # the tiny model with a chat template TRL parses tool calls of
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    tok.save_pretrained(model)
    for f in tiny_model_dir.iterdir():
        if not (model / f.name).exists():
            (model / f.name).symlink_to(f)
    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(generate_chain_tasks(2, seed=0, split="train"), str(tasks))
    code = substituted(blocks("python")[0], {
        '"Qwen/Qwen2.5-0.5B-Instruct"': repr(str(model)),
        '"tasks.jsonl"': repr(str(tasks)),
        'GRPOConfig(output_dir="runs/bfcl-env", max_completion_length=512, max_steps=200)':
            f'GRPOConfig(output_dir={str(tmp_path / "out")!r}, max_completion_length=8, max_steps=1, '
            'per_device_train_batch_size=2, num_generations=2, use_cpu=True, bf16=False, '
            'gradient_checkpointing=False, report_to="none", save_strategy="no")',
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
