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
    from tooltune.training.runner import grpo_args

    cfg = make_config(tiny_model_dir, tmp_path, **{"run.seed": 7})
    assert grpo_args(cfg, str(tmp_path), cpu=True).seed == 7
    cfg = make_config(tiny_model_dir, tmp_path, **{"run.seed": 7, "grpo.seed": 1})
    assert grpo_args(cfg, str(tmp_path), cpu=True).seed == 1
