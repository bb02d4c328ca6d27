"""A training run folder is one run: resume continues only the same settings, a finished run resumes to
nothing, a folder holding results is refused without --resume, and one process writes it at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_rundir import lock_holder
from test_training_grpo import KeyedReward, make_config, make_rows

from tooltune.rundir import RunFolderBusy, RunMismatch
from tooltune.training.runner import train


@pytest.fixture(scope="module")
def finished_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runner") / "run"
    train(make_config(tiny_model_dir, out), reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))
    return out


def test_resuming_a_finished_run_adds_nothing(finished_run: Path, tiny_model_dir: Path) -> None:
    before = {p.name: p.read_bytes() for p in (finished_run / "metrics.jsonl", finished_run / "summary.json")}
    train(make_config(tiny_model_dir, finished_run), resume=True, reward_funcs=[KeyedReward(set())],
          train_rows=make_rows(8))
    after = {p.name: p.read_bytes() for p in (finished_run / "metrics.jsonl", finished_run / "summary.json")}
    assert after == before


def test_resume_with_other_settings_is_refused_naming_them(finished_run: Path, tiny_model_dir: Path) -> None:
    config_before = (finished_run / "config.yaml").read_text()
    changed = make_config(tiny_model_dir, finished_run, **{"grpo.learning_rate": 1e-3, "run.seed": 7})
    with pytest.raises(RunMismatch) as e:
        train(changed, resume=True, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))
    assert "grpo.learning_rate" in str(e.value) and "run.seed" in str(e.value)
    assert (finished_run / "config.yaml").read_text() == config_before


def test_a_folder_with_results_needs_resume(finished_run: Path, tiny_model_dir: Path) -> None:
    with pytest.raises(RunMismatch, match="pass --resume"):
        train(make_config(tiny_model_dir, finished_run), reward_funcs=[KeyedReward(set())],
              train_rows=make_rows(8))


def test_a_second_writer_is_refused(tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "busy"
    with lock_holder(out), pytest.raises(RunFolderBusy, match="in use by another run"):
        train(make_config(tiny_model_dir, out), reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))


def test_prompts_keeping_reasoning_a_chat_template_drops_are_refused(tmp_path: Path,
                                                                     tiny_model_dir: Path) -> None:
    import shutil

    from test_prompts import QWEN3_LIKE
    from transformers import AutoTokenizer

    from tooltune.prompts.chat_template import ReasoningHistoryLost

    model = tmp_path / "qwen3_like"
    shutil.copytree(tiny_model_dir, model)
    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = QWEN3_LIKE
    tok.save_pretrained(model)
    rows = make_rows(8)
    for r in rows:  # an earlier turn with its reasoning, as native history renders it
        r["prompt"] = [{"role": "user", "content": "first"},
                       {"role": "assistant", "content": '<think>why</think>\n<tool_call>\n[]\n</tool_call>'},
                       *r["prompt"]]
    with pytest.raises(ReasoningHistoryLost, match="data.keep_reasoning"):
        train(make_config(model, tmp_path / "kept"), reward_funcs=[KeyedReward(set())], train_rows=rows)
    assert not (tmp_path / "kept" / "metrics.jsonl").exists()
    run = train(make_config(model, tmp_path / "dropped", **{"data.keep_reasoning": False}),
                reward_funcs=[KeyedReward(set())], train_rows=rows)
    assert (run / "final").is_dir()


def test_the_grpo_seed_defaults_to_the_run_seed_and_overrides_it(tiny_model_dir: Path, tmp_path: Path
                                                                  ) -> None:
    from tooltune.training.grpo_stage import grpo_args

    cfg = make_config(tiny_model_dir, tmp_path, **{"run.seed": 7})
    assert grpo_args(cfg, str(tmp_path), cpu=True).seed == 7
    cfg = make_config(tiny_model_dir, tmp_path, **{"run.seed": 7, "grpo.seed": 1})
    assert grpo_args(cfg, str(tmp_path), cpu=True).seed == 1


@pytest.mark.parametrize("template", ["tool_n1", "native"])
def test_one_train_command_runs_each_check_once(
    template: str, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tooltune train` through SFT and GRPO resolves its run once: the engine versions, the system prompt
    and the model path are each checked once (the native template reads the model's format first)."""
    from collections import Counter

    import yaml
    from test_training_sft import _samples

    from tooltune.cli import main
    from tooltune.prompts import TEMPLATES
    from tooltune.schema import write_jsonl
    from tooltune.training import config, engine_fence, grpo, resolved_run, runner

    calls: Counter[str] = Counter()

    def count(owner: object, name: str) -> None:
        real = getattr(owner, name)

        def counted(*args: object, **kw: object) -> object:
            calls[name] += 1
            return real(*args, **kw)

        monkeypatch.setattr(owner, name, counted)

    for module in (engine_fence, runner, grpo):  # every module that calls it, by its imported name
        count(module, "check_engine_versions")
    for module in (config, resolved_run):
        count(module, "resolve_system_prompt")
    count(config.TrainConfig, "check_model")
    monkeypatch.setattr(runner, "shutdown_processes", lambda: None)
    data = tmp_path / "train.jsonl"
    write_jsonl(_samples(4), str(data))
    out = tmp_path / "run"
    args = {"model.name_or_path": tiny_model_dir, "run.output_dir": out, "run.device": "cpu",
            "data.train": data, "data.template": template, "data.system_prompt": "bfcl_strong",
            "sft.enabled": "true", "sft.engine": "torch", "sft.max_steps": 1, "sft.batch_size": 4,
            "grpo.max_steps": 1, "grpo.num_generations": 2, "grpo.prompts_per_step": 2,
            "grpo.per_device_batch_size": 4, "grpo.max_completion_length": 4, "run.save_steps": 1000,
            "diagnostics.eval_samples": 0}
    assert main(["train", *(x for k, v in args.items() for x in (f"--{k}", str(v)))]) == 0
    assert calls == {"check_engine_versions": 1, "resolve_system_prompt": 1, "check_model": 1}
    recorded = yaml.safe_load((out / "config.yaml").read_text())
    assert recorded["data"]["system_prompt"] == TEMPLATES["bfcl_strong"].system  # the resolved text
    assert (out / "sft" / "final").is_dir() and (out / "final").is_dir()
