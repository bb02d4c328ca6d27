"""Resume (SIGKILL + `--resume` in another process; an interrupted run resumed at and after an epoch
boundary) and training in two CPU processes (torchrun, gloo)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_training_grpo import KeyedReward, make_config, make_rows

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

# Runs one training in a fresh process. argv: model_dir out_dir log_prefix resume(0/1) max_steps
SCRIPT = r"""
import json, os, sys
sys.path[:0] = [sys.argv[6], sys.argv[7]]
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
torch.set_num_threads(1)
from test_training_grpo import KeyedReward, make_config, make_rows
from tooltune.training import grpo
from tooltune.training.runner import shutdown_processes, train

rank = int(os.environ.get("RANK", "0"))
log = f"{sys.argv[3]}.rank{rank}"
orig = grpo.ToolTuneGRPOTrainer._compute_loss

def spy(self, model, inputs):
    with open(log + ".rows", "a") as f:
        f.write(json.dumps([self.state.global_step, inputs["completion_ids"].size(0)]) + "\n")
    return orig(self, model, inputs)

grpo.ToolTuneGRPOTrainer._compute_loss = spy
over = json.loads(sys.argv[8])
cfg = make_config(sys.argv[1], sys.argv[2], **over)
trainer_box = {}
orig_init = grpo.ToolTuneGRPOTrainer.__init__

def init(self, *a, **k):
    orig_init(self, *a, **k)
    trainer_box["t"] = self

grpo.ToolTuneGRPOTrainer.__init__ = init
train(cfg, resume=sys.argv[4] == "1", reward_funcs=[KeyedReward({0, 2, 4, 6}, log=log + ".prompts")],
      train_rows=make_rows(8))
t = trainer_box["t"]
kept = t.tooltune.prompt_filter
with open(log + ".filter", "w") as f:
    json.dump({"streaks": kept.state_dict()["streaks"] if kept else None,
               "step": t.state.global_step}, f)
shutdown_processes()  # what `tooltune train` does after success
"""

OVERRIDES = {
    "filter.enabled": True,
    "downsample.enabled": True,
    "downsample.m": 2,
    "grpo.max_steps": 6,
    "run.save_steps": 1,
    "run.save_total_limit": 2,
}


def _cmd(script: Path, model: Path, out: Path, log: Path, resume: bool, over: dict) -> list[str]:
    return [
        str(script),
        str(model),
        str(out),
        str(log),
        "1" if resume else "0",
        "-",
        str(TESTS),
        str(REPO),
        json.dumps(over),
    ]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS), env.get("PYTHONPATH", "")])
    return env


def _loss_steps(run: Path) -> list[int]:
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in recs if r["stage"] == "grpo" and "loss" in r]


def test_sigkill_then_resume_loses_and_repeats_nothing(tiny_model_dir: Path, tmp_path: Path) -> None:
    from tooltune.training.runner import train

    # Reference: the same run, uninterrupted (in this process).
    ref_reward = KeyedReward({0, 2, 4, 6})
    train(
        make_config(tiny_model_dir, tmp_path / "ref", **OVERRIDES),
        reward_funcs=[ref_reward],
        train_rows=make_rows(8),
    )

    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    out, log = tmp_path / "run", tmp_path / "log"
    proc = subprocess.Popen(
        [sys.executable, *_cmd(script, tiny_model_dir, out, log, False, OVERRIDES)],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    marker = out / "grpo" / "checkpoint-3" / "tooltune_state.json"
    deadline = time.time() + 240
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.stderr.read().decode()[-3000:] if proc.poll() is not None else "timeout"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    (tmp_path / "log.rank0.prompts").rename(tmp_path / "killed.prompts")

    resumed = subprocess.run(
        [sys.executable, *_cmd(script, tiny_model_dir, out, log, True, OVERRIDES)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    start = int(summary["grpo"]["resumed_from"].rsplit("-", 1)[1])
    assert start >= 3
    # no finished step lost or repeated: the metrics hold steps 1..6 once each
    assert _loss_steps(out) == [1, 2, 3, 4, 5, 6]
    # the rollouts of steps 1..start (before the kill) + after the resume = the uninterrupted run's
    killed = [json.loads(x) for x in (tmp_path / "killed.prompts").read_text().splitlines()]
    after = [json.loads(x) for x in (tmp_path / "log.rank0.prompts").read_text().splitlines()]
    assert killed[:start] + after == ref_reward.seen
    # filter state restored from the checkpoint and carried on to the same final state
    final = json.loads((tmp_path / "log.rank0.filter").read_text())
    assert final["step"] == 6
    assert (
        final["streaks"]
        == json.loads((tmp_path / "ref" / "summary.json").read_text())["grpo"]["filter"]["streaks"]
    )


class _Crash(Exception):
    """Stands for a crash right after a checkpoint was written."""


# per-step records compared between a resumed and an uninterrupted run
COMPARED = ("reward", "loss", "grad_norm", "learning_rate", "completions/mean_length")


@pytest.mark.parametrize(
    ("filtering", "checkpoint"),
    [
        (False, 4),  # the end of epoch 1 (8 prompts, 2 per step)
        (False, 6),  # inside epoch 2
        (True, 4),  # the end of epoch 1 (8 prompts)
        (True, 6),  # the end of epoch 2 (the 4 unsolved prompts)
    ],
)
def test_resumed_run_replays_the_uninterrupted_run(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filtering: bool, checkpoint: int
) -> None:
    from transformers import TrainerCallback  # deferred: transformers takes seconds to import

    from tooltune.training.grpo import ToolTuneGRPOTrainer  # deferred: imports trl (seconds)
    from tooltune.training.runner import train  # deferred: imports trl (seconds)

    over = {"filter.enabled": filtering, "grpo.max_steps": 8, "run.save_steps": checkpoint}
    ref_reward = KeyedReward({0, 2, 4, 6})
    ref = train(
        make_config(tiny_model_dir, tmp_path / "ref", **over),
        reward_funcs=[ref_reward],
        train_rows=make_rows(8),
    )

    class CrashAfterCheckpoint(TrainerCallback):
        def on_save(self, args: object, state: object, control: object, **kw: object) -> None:
            if state.global_step == checkpoint:
                raise _Crash

    init = ToolTuneGRPOTrainer.__init__

    def crashing_init(self: ToolTuneGRPOTrainer, *a: object, **k: object) -> None:
        init(self, *a, **k)
        self.add_callback(CrashAfterCheckpoint())

    cfg = make_config(tiny_model_dir, tmp_path / "run", **over)
    with monkeypatch.context() as m, pytest.raises(_Crash):
        m.setattr(ToolTuneGRPOTrainer, "__init__", crashing_init)
        train(cfg, reward_funcs=[KeyedReward({0, 2, 4, 6})], train_rows=make_rows(8))
    reward = KeyedReward({0, 2, 4, 6})
    run = train(cfg, resume=True, reward_funcs=[reward], train_rows=make_rows(8))

    assert json.loads((run / "summary.json").read_text())["grpo"]["resumed_from"].endswith(f"-{checkpoint}")
    assert reward.seen == ref_reward.seen[checkpoint:]  # the same prompts, step by step
    records = [_step_records(r) for r in (ref, run)]
    assert [r["step"] for r in records[1]] == list(range(1, 9))
    # rollouts (sampled from the restored RNG state), rewards, losses and the schedule: step for step
    assert [{k: r.get(k) for k in COMPARED} for r in records[1][checkpoint:]] == [
        {k: r.get(k) for k in COMPARED} for r in records[0][checkpoint:]
    ]


def _step_records(run: Path) -> list[dict]:
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in recs if r["stage"] == "grpo" and "loss" in r]


def test_incomplete_checkpoint_is_not_resumed_from(tmp_path: Path) -> None:
    from tooltune.training.runner import last_complete_checkpoint

    for step, complete in ((2, True), (3, True), (4, False)):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        (d / "trainer_state.json").write_text("{}")
        if complete:
            (d / "tooltune_state.json").write_text("{}")
    assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-3")
    assert last_complete_checkpoint(tmp_path / "nothing") is None


@pytest.mark.skipif(sys.platform != "linux", reason="gloo CPU processes are tested on Linux")
def test_two_processes_share_filter_state_and_downsample(tiny_model_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    out, log = tmp_path / "run", tmp_path / "log"
    # 2 prompts x 4 rollouts per step split over 2 processes: one whole group (4 rollouts) per rank
    over = dict(OVERRIDES, **{"grpo.per_device_batch_size": 4, "run.save_steps": 1000})
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(29500 + os.getpid() % 1000),
        *_cmd(script, tiny_model_dir, out, log, False, over),
    ]
    res = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stderr[-4000:]
    states = [json.loads((tmp_path / f"log.rank{r}.filter").read_text()) for r in (0, 1)]
    assert states[0] == states[1] and states[0]["step"] == 6
    assert states[0]["streaks"] == {
        "0": 1,
        "2": 1,
        "4": 1,
        "6": 1,
    }  # every solved prompt, seen on either rank
    for r in (0, 1):
        rows = [json.loads(x) for x in (tmp_path / f"log.rank{r}.rows").read_text().splitlines()]
        assert [n for _, n in rows] == [2] * 6  # m = 2 of each rank's group reach the loss
        prompts = [json.loads(x) for x in (tmp_path / f"log.rank{r}.prompts").read_text().splitlines()]
        assert len(prompts) == 6 and all(len(set(p)) == 1 and len(p) == 4 for p in prompts)
        assert all(p[0] % 2 == 1 for p in prompts[4:])  # epoch 2: solved prompts got no rollouts
    both = [
        sorted({a[0], b[0]})
        for a, b in zip(
            *[
                [json.loads(x) for x in (tmp_path / f"log.rank{r}.prompts").read_text().splitlines()]
                for r in (0, 1)
            ],
            strict=True,
        )
    ]
    assert sorted(p for pair in both[:4] for p in pair) == list(range(8))  # epoch 1 covers every prompt once
