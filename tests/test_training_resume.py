"""A resumed run continues only on the inputs it started with (data files and model by content), and only
from a checkpoint whose files are whole: a torn newest checkpoint is skipped, with a warning naming the
file, for the one before it."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from test_training_grpo import KeyedReward, make_config, make_rows

from tooltune.cli import main
from tooltune.rundir import RunMismatch, content_digest
from tooltune.schema import Sample, write_jsonl
from tooltune.training.resume import last_complete_checkpoint, run_inputs, verify_checkpoint
from tooltune.training.runner import train

TOOL = {"name": "f", "description": "Look up x.",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}


def _write_samples(path: Path, offset: int = 0) -> Path:
    samples = [Sample(id=f"s{i}", source="t", category="simple", tools=[TOOL],
                      messages=[{"role": "user", "content": f"f {i + offset}"}],
                      answer=[{"name": "f", "arguments": {"x": i + offset}}]) for i in range(4)]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(samples, path)
    return path


def _cli_args(model: Path, data: Path, out: Path) -> list[str]:
    cfg = make_config(model, out, **{"data.train": str(data)})
    keys = {"model.name_or_path": str(model), "data.train": str(data), "run.output_dir": str(out),
            "run.device": "cpu", "run.save_steps": 1000, "grpo.num_generations": cfg.grpo.num_generations,
            "grpo.prompts_per_step": 2, "grpo.per_device_batch_size": cfg.grpo.per_device_batch_size,
            "grpo.max_steps": 1, "grpo.max_completion_length": 8, "diagnostics.eval_samples": 0}
    return ["train", *[a for k, v in keys.items() for a in (f"--{k}", str(v))]]


def test_resume_after_the_data_file_was_replaced_is_refused_naming_it(tiny_model_dir, tmp_path, capsys):
    data = _write_samples(tmp_path / "data" / "train.jsonl")
    out = tmp_path / "run"
    assert main(_cli_args(tiny_model_dir, data, out)) == 0
    assert json.loads((out / "run.json").read_text())["inputs"]["data.train"] == content_digest(data)
    assert main([*_cli_args(tiny_model_dir, data, out), "--resume"]) == 0  # the same data: nothing to do
    capsys.readouterr()
    _write_samples(data, offset=100)  # another file under the same path
    assert main([*_cli_args(tiny_model_dir, data, out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "data.train" in err and str(data) in err and "changed since it started" in err
    assert err.count("\n") == 1  # one line


def test_resume_after_the_model_folder_changed_is_refused_naming_it(tiny_model_dir, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    cfg = make_config(model, tmp_path / "run")
    train(cfg, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))
    config = json.loads((model / "config.json").read_text())
    config["tooltune_note"] = "another model under the same path"
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunMismatch, match=r"model\.name_or_path \(.*model\)"):
        train(cfg, resume=True, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))


def test_inputs_given_in_memory_and_by_hub_id_have_digests(tiny_model_dir, tmp_path):
    cfg = make_config(tiny_model_dir, tmp_path / "run", **{"model.name_or_path": "Qwen/Qwen3-4B"})
    inputs = run_inputs(cfg, make_rows(2), None)
    assert inputs["model.name_or_path"] == ("Qwen/Qwen3-4B", "hub:Qwen/Qwen3-4B")
    assert inputs["data.train"][1].startswith("rows-sha256:") and "data.val" not in inputs
    assert run_inputs(cfg, make_rows(3))["data.train"] != inputs["data.train"]


@pytest.fixture(scope="module")
def checkpointed(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GRPO run with a checkpoint after each of its two steps."""
    out = tmp_path_factory.mktemp("resume") / "run"
    train(make_config(tiny_model_dir, out, **{"run.save_steps": 1}), reward_funcs=[KeyedReward(set())],
          train_rows=make_rows(8))
    assert verify_checkpoint(out / "grpo" / "checkpoint-2") == []
    return out


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("damage", [
    ("model.safetensors", _truncate),
    ("optimizer.pt", lambda p: p.write_bytes(b"")),
    ("trainer_state.json", _truncate),
    ("scheduler.pt", _truncate),
])
def test_a_torn_newest_checkpoint_is_skipped_with_a_warning_naming_the_file(checkpointed, tmp_path, damage,
                                                                             caplog):
    name, how = damage
    run = tmp_path / "run"
    shutil.copytree(checkpointed, run)
    how(run / "grpo" / "checkpoint-2" / name)
    with caplog.at_level(logging.WARNING, logger="tooltune.training.resume"):
        found = last_complete_checkpoint(run / "grpo", ("tooltune_state.json", "trainer_state.json"))
    assert found == str(run / "grpo" / "checkpoint-1")
    assert any(name in r.getMessage() and "checkpoint-2" in r.getMessage() for r in caplog.records)


def test_a_run_killed_after_a_torn_checkpoint_resumes_from_the_one_before(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    cfg = make_config(tiny_model_dir, run, **{"run.save_steps": 1})
    train(cfg, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))
    shutil.rmtree(run / "final")  # killed after saving checkpoint-2, before the end
    (run / "summary.json").unlink()
    _truncate(run / "grpo" / "checkpoint-2" / "model.safetensors")
    train(cfg, resume=True, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["grpo"]["resumed_from"] == str(run / "grpo" / "checkpoint-1")
    assert summary["grpo"]["steps"] == 2 and (run / "final").is_dir()


def test_every_checkpoint_damaged_means_no_checkpoint(checkpointed, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(checkpointed, run)
    for step in (1, 2):
        (run / "grpo" / f"checkpoint-{step}" / "rng_state.pth").write_bytes(b"")
    assert last_complete_checkpoint(run / "grpo", ("tooltune_state.json",)) is None
