"""Agentic rollouts on TRL: GRPO with filtering and down-sampling on whole trajectories, the tool mask
token by token in the loss (the episode driver itself: tests/test_generation_trajectories.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tooltune.data.synthetic.chain_tasks import chain_tasks
from tooltune.data.synthetic.quickstart_task import TaskConfig, make_multi_step_splits
from tooltune.prompts import render_answer
from tooltune.schema import Sample, ToolCall

TEMPLATE = "tool_n1"


@pytest.fixture(scope="module")
def tasks() -> list[Sample]:
    splits = make_multi_step_splits(TaskConfig(n_train=60, n_val=0, n_heldout=0, n_unseen=0))
    return chain_tasks(splits["train"])


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


def goal(task: Sample) -> list[ToolCall]:
    return [ToolCall.from_dict(c) for c in task.meta["env"]["goal"]]


def agentic_config(model_dir: Path, out: Path, **over: Any) -> Any:
    from tooltune.training.config import load_config

    base = {
        "model.name_or_path": str(model_dir),
        "run.output_dir": str(out),
        "run.device": "cpu",
        "run.save_steps": 1000,
        "data.template": TEMPLATE,
        "reward.components": {"outcome": 1.0, "turn_format": 0.0},
        "agentic.enabled": True,
        "agentic.max_turns": 3,
        "grpo.num_generations": 4,
        "grpo.prompts_per_step": 2,
        "grpo.per_device_batch_size": 8,
        "grpo.max_steps": 2,
        "grpo.max_completion_length": 48,
        "grpo.learning_rate": 1e-2,
        "diagnostics.eval_samples": 0,
        "diagnostics.entropy_split": False,
    }
    base.update(over)
    return load_config(None, base)


class ScriptedTurns:
    """Replaces the trainer's one-turn generation: rollout r of a group solves the task when r is even,
    and makes a wrong second call when r is odd; every context it was given is recorded."""

    def __init__(self, tokenizer: Any, tasks_by_prompt: dict[str, Sample]) -> None:
        self.tok, self.tasks = tokenizer, tasks_by_prompt

    def __call__(self, trainer: Any, prompt_ids: list, images: Any, mm: Any, n: int) -> tuple:
        out = []
        for j, ctx in enumerate(prompt_ids):
            text = self.tok.decode(ctx)
            task = next(t for k, t in self.tasks.items() if k in text)
            first, second = goal(task)
            turn = text.count("<|im_start|>assistant") - 1
            wrong = ToolCall(second.name, {**second.arguments, "zz": 1})
            calls = [[first], [second if j % 2 == 0 else wrong], []][min(turn, 2)]
            out.append(self.tok.encode(render_answer(calls, TEMPLATE), add_special_tokens=False)
                       + [self.tok.eos_token_id])
        return out, None


def task_rows(chosen: list[Sample]) -> list[dict[str, Any]]:
    """Training rows of environment tasks, as the runner builds them (with `prompt_index`)."""
    from tooltune.data.export import to_trl_rows

    return [{**r, "prompt_index": i} for i, r in enumerate(to_trl_rows(chosen, TEMPLATE))]


def test_grpo_trains_on_trajectories_with_the_tool_mask(
    tiny_model_dir: Path, tmp_path: Path, tokenizer: Any, tasks: list[Sample], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooltune.training.grpo import ToolTuneGRPOTrainer
    from tooltune.training.grpo_stage import build_reward_funcs
    from tooltune.training.runner import train

    chosen = tasks[:4]
    rows = task_rows(chosen)
    scripted = ScriptedTurns(tokenizer, {t.messages[0]["content"]: t for t in chosen})
    monkeypatch.setattr(ToolTuneGRPOTrainer, "_generate_single_turn", lambda self, *a: scripted(self, *a))
    seen: list[dict[str, Any]] = []
    orig = ToolTuneGRPOTrainer._compute_loss

    def spy(trainer: Any, model: Any, inputs: dict) -> Any:
        seen.append({k: inputs[k].clone() for k in ("completion_ids", "completion_mask", "tool_mask",
                                                    "advantages")})
        return orig(trainer, model, inputs)

    monkeypatch.setattr(ToolTuneGRPOTrainer, "_compute_loss", spy)
    cfg = agentic_config(tiny_model_dir, tmp_path / "run", **{"downsample.enabled": True, "downsample.m": 2})
    run = train(cfg, reward_funcs=build_reward_funcs(cfg), train_rows=rows)
    assert len(seen) == 2
    for batch in seen:
        assert batch["completion_ids"].size(0) == 2 * 2  # m = 2 of 4 rollouts kept per prompt
        # down-sampling keeps the max-variance pair: one solved, one failed trajectory per prompt
        adv = sorted(batch["advantages"].tolist())
        assert adv[0] < 0 < adv[-1]
        for ids, cmask, tmask in zip(batch["completion_ids"], batch["completion_mask"], batch["tool_mask"]):
            n = int(cmask.sum())
            ids, tmask = ids.tolist()[:n], tmask.tolist()[:n]
            # token by token: the runs of the mask are model turn, tool messages, model turn, tool
            # messages, model turn; each model run is one whole call block ending in EOS, each masked run
            # is exactly the chat template's tool message(s) and the next assistant header
            runs: list[tuple[int, list[int]]] = []
            for tok, m in zip(ids, tmask):
                if runs and runs[-1][0] == m:
                    runs[-1][1].append(tok)
                else:
                    runs.append((m, [tok]))
            assert [m for m, _ in runs] == [1, 0, 1, 0, 1]
            for m, toks in runs:
                text = tokenizer.decode(toks)
                if m:
                    assert text.startswith("<think>") and text.endswith("</tool_call><|im_end|>"), text
                else:
                    assert text.startswith("\n<|im_start|>tool\n")
                    assert text.endswith("<|im_start|>assistant\n")
                    assert "<tool_call>" not in text
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in recs if "loss" in r]
    assert all(r["tooltune/agentic_turns"] == 3.0 for r in steps)
    assert all(r["tooltune/agentic_success"] == 0.5 for r in steps)
    assert all(r["rewards/outcome/mean"] == 0.5 for r in steps)


def test_prerollout_filter_skips_tasks_whose_episodes_all_succeed(
    tiny_model_dir: Path, tmp_path: Path, tokenizer: Any, tasks: list[Sample], monkeypatch: pytest.MonkeyPatch
) -> None:
    """k = 1: a task whose every trajectory succeeded in epoch 1 gets no episodes in epoch 2."""
    from tooltune.training.grpo import ToolTuneGRPOTrainer
    from tooltune.training.grpo_stage import build_reward_funcs
    from tooltune.training.runner import train

    chosen = tasks[:4]
    rows = task_rows(chosen)
    solved = chosen[0]
    scripted = ScriptedTurns(tokenizer, {t.messages[0]["content"]: t for t in chosen})
    started: list[str] = []  # the task of every episode, at its first turn

    def turns(self: Any, prompt_ids: list, *a: Any) -> tuple:
        out, _ = scripted(self, prompt_ids, *a)
        for j, ctx in enumerate(prompt_ids):
            text = tokenizer.decode(ctx)
            if text.count("<|im_start|>assistant") == 1:
                started.append(next(t.id for t in chosen if t.messages[0]["content"] in text))
            if solved.messages[0]["content"] in text and text.count("<|im_start|>assistant") == 2:
                first, second = goal(solved)  # every rollout of this task makes the right second call
                out[j] = tokenizer.encode(render_answer([second], TEMPLATE), add_special_tokens=False) + [
                    tokenizer.eos_token_id
                ]
        return out, None

    monkeypatch.setattr(ToolTuneGRPOTrainer, "_generate_single_turn", turns)
    cfg = agentic_config(tiny_model_dir, tmp_path / "run", **{"filter.enabled": True, "filter.k": 1,
                                                              "grpo.max_steps": 4})
    train(cfg, reward_funcs=build_reward_funcs(cfg), train_rows=rows)
    per_epoch = 2 * 2 * 4  # 2 steps x 2 tasks x 4 episodes
    first_epoch, later = started[:per_epoch], started[per_epoch:]
    assert first_epoch.count(solved.id) == 4 and len(later) >= 4
    assert solved.id not in later  # filtered before any rollout: its episodes were never generated


def _doc_block(doc: str, first_line: str) -> str:
    """The fenced block of `doc` whose first line starts with `first_line` (without the fences)."""
    for block in doc.split("```")[1::2]:
        body = block.split("\n", 1)[1] if "\n" in block else ""
        if body.startswith(first_line):
            return body
    raise AssertionError(f"no block starting with {first_line!r}")


def _command(block: str) -> list[str]:
    import shlex

    return shlex.split(block.replace("\\\n", " ").lstrip("$ ").split("\n")[0])[1:]  # without `tooltune`


def test_the_documented_mcp_training_command_runs_as_written(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """docs/environments.md: the to-do server, its tasks, `tooltune data tasks mcp` and `tooltune train`
    as written, on a quickstart-like `runs/quickstart/train.yaml` (SFT on, single-step data.val) of the
    test-size model."""
    import os
    import sys

    from tooltune.cli import main
    from tooltune.schema import read_jsonl, write_jsonl
    from tooltune.training.config import dump_config

    pytest.importorskip("mcp")
    doc = (Path(__file__).resolve().parents[1] / "docs" / "environments.md").read_text()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    Path("todo_server.py").write_text(_doc_block(doc, '"""A to-do list served over MCP'))
    Path("todo_tasks.jsonl").write_text(_doc_block(doc, '{"id": "todo-1"'))
    assert main(_command(_doc_block(doc, "$ tooltune data tasks mcp"))) == 1  # one line rejected, as shown
    assert len(read_jsonl("todo_train.jsonl")) == 3
    single = [Sample(id=f"qs-val-{i:05d}", source="t", category="simple",
                     messages=[{"role": "user", "content": f"f {i}"}],
                     tools=[{"name": "f", "description": "", "parameters": {"type": "object", "properties": {
                         "x": {"type": "integer"}}}}], answer=[{"name": "f", "arguments": {"x": i}}])
              for i in range(4)]
    Path("runs/quickstart/data").mkdir(parents=True)
    write_jsonl(single, "runs/quickstart/data/train.jsonl")
    write_jsonl(single, "runs/quickstart/data/val.jsonl")
    quickstart = agentic_config(tiny_model_dir, Path("runs/quickstart/reproduce"), **{
        "agentic.enabled": False, "reward.components": {"binary": 1.0}, "sft.enabled": True,
        "sft.max_steps": 1, "data.train": "runs/quickstart/data/train.jsonl",
        "data.val": "runs/quickstart/data/val.jsonl", "grpo.num_generations": 2, "grpo.max_steps": 1,
        "grpo.per_device_batch_size": 4, "grpo.max_completion_length": 16, "agentic.max_turns": 2,
        "diagnostics.eval_samples": 2, "diagnostics.eval_max_new_tokens": 8})
    dump_config(quickstart, Path("runs/quickstart/train.yaml"))
    train = _command(_doc_block(doc, "tooltune train --config runs/quickstart/train.yaml --agentic"))
    # without data.val the quickstart's single-step rows would be the held-out tasks: refused at once
    at = train.index("--data.val")
    assert main(train[:at] + train[at + 2 :]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "data.val: sample 'qs-val-00000'" in err[0] and "bug" not in err[0]
    assert main(train) == 0
    summary = json.loads(Path("runs/todo/summary.json").read_text())
    assert summary["grpo"]["steps"] == 1 and "sft" not in summary
    assert len(summary["grpo"]["heldout_episode_success"]) == 1  # the held-out curve: episode success
