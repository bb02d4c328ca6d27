"""The quickstart's chains as environment tasks: the goal is reachable, splits never share a request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import one_error_line, run_cli

from tooltune.data.synthetic.chain_tasks import chain_task, generate_chain_tasks, split_of
from tooltune.environments import make_environment
from tooltune.schema import ToolCall, read_jsonl


def test_every_task_reaches_its_goal_by_its_ground_truth() -> None:
    for task in generate_chain_tasks(200, seed=3):
        env = make_environment(task.meta["env"]["name"])
        env.reset(task)
        results = [env.step(ToolCall.from_dict(c)) for c in task.meta["env"]["goal"]]
        assert not any(r.error for r in results)
        # the first call returns the value the second call copies
        value = json.loads(results[0].content)
        assert set(value.values()) <= set(task.meta["env"]["goal"][1]["arguments"].values())
        assert env.outcome().success and env.outcome().score == 1.0
        assert task.answer == [ToolCall.from_dict(task.meta["env"]["goal"][0])]


def test_splits_are_disjoint_whatever_the_sizes() -> None:
    train = generate_chain_tasks(300, seed=0, split="train")
    heldout_small = generate_chain_tasks(40, seed=0, split="heldout")
    heldout_big = generate_chain_tasks(120, seed=0, split="heldout")
    requests = {t.messages[0]["content"] for t in train}
    assert not requests & {t.messages[0]["content"] for t in heldout_small + heldout_big}
    assert [t.id for t in heldout_small] == [t.id for t in heldout_big[:40]]  # a prefix: deterministic
    assert all(split_of(t) == "heldout" for t in heldout_big)


def test_a_sample_that_is_not_a_second_step_is_refused() -> None:
    first_step = generate_chain_tasks(1)[0]  # a task: its messages are the request alone
    try:
        chain_task(first_step)
    except ValueError as e:
        assert first_step.id in str(e)
    else:
        raise AssertionError("a one-message sample was accepted as a chain step")


def test_cli_writes_tasks_of_both_environments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for env in ("synthetic_chain", "bfcl"):
        out = tmp_path / "sub" / f"{env}.jsonl"
        assert run_cli(["data", "tasks", env, "--n", "12", "--split", "heldout", "--out", out]) == 0
        tasks = read_jsonl(str(out))
        assert len(tasks) == 12 and all(t.meta["env"]["name"] == env for t in tasks)
    capsys.readouterr()
    assert run_cli(["data", "tasks", "bfcl", "--n", "0", "--out", tmp_path / "x.jsonl"]) == 2
    assert "--n: must be >= 1" in one_error_line(capsys)
