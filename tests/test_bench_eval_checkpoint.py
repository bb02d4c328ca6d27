"""bench/eval_checkpoint.py refuses a checkpoint or a suite the run does not have, naming it, before it
loads a model or writes to the run folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import bench_module

from tooltune import config as config_mechanism
from tooltune.experiment.config import load_config

MINI = Path(__file__).resolve().parents[1] / "configs" / "quickstart_real_smollm2_mini.yaml"


@pytest.mark.parametrize(("argv", "message"), [
    (["grpo", "--suites", "bfcl,nope"], "--suites: nope not in the run's benchmarks.suites"),
    (["final"], "name: one of base, sft, grpo, sft_continued, got 'final'"),
])
def test_what_the_run_lacks_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                     message: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    config_mechanism.dump(load_config(MINI), run / "config.yaml")
    before = sorted(p.name for p in run.iterdir())
    monkeypatch.setattr(sys, "argv", ["eval_checkpoint.py", str(run), *argv])
    with pytest.raises(SystemExit, match=message):
        bench_module("eval_checkpoint").main()
    assert sorted(p.name for p in run.iterdir()) == before
