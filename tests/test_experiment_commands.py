"""`tooltune quickstart`'s command line: flags from the settings, the busy-machine note, `make demo`."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "configs" / "quickstart_mini.yaml"


def test_cli_flags_come_from_the_config_and_bench_is_registered() -> None:
    from tooltune import bench_commands
    from tooltune.config import given_overrides
    from tooltune.experiment import commands

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    commands.register(sub)
    bench_commands.register(sub)
    args = parser.parse_args(
        ["quickstart", "--out", "x", "--seed", "2", "--train.grpo.learning_rate", "1e-4", "--config", "c"]
    )
    assert args.config == "c" and callable(args.func)
    assert given_overrides(args) == {"seed": "2", "train.grpo.learning_rate": "1e-4"}
    with pytest.raises(SystemExit):  # derived keys have no flag
        parser.parse_args(["quickstart", "--train.run.seed", "1"])
    args = parser.parse_args(["bench", "efficiency", "--out", "y"])
    assert args.name == "efficiency" and args.args == ["--out", "y"]
    assert "efficiency" in bench_commands.available(REPO / "bench")



def test_a_busy_machine_is_named_at_start_with_what_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooltune.cli import main
    from tooltune.experiment import commands

    note = commands.busy_machine_note(2, resuming=False, load=2.7, cores=2)
    assert note == ('the machine is busy (load 2.7 on 2 cores, about 0 free): 2 torch threads will run '
                    'several times slower than the measured times; pass --threads 1 '
                    '(make demo ARGS="--threads 1")')
    assert commands.busy_machine_note(2, resuming=False, load=0.2, cores=2) is None  # quiet
    assert commands.busy_machine_note(2, resuming=False, load=1.2, cores=4) is None  # enough free cores
    # one thread already, or a run resuming with the threads it started with: only the warning
    for threads, resuming in ((1, False), (2, True)):
        said = commands.busy_machine_note(threads, resuming=resuming, load=3.0, cores=2)
        assert said is not None and said.endswith("expect it to run slower than the measured times")
    monkeypatch.setattr(commands.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    monkeypatch.setattr(commands, "available_cores", lambda: 2)
    assert main(["quickstart", "--config", str(MINI), "--out", str(tmp_path / "q"), "--threads", "2",
                 "--stop-after", "data"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == ("tooltune quickstart: the machine is busy (load 3.0 on 2 cores, about 0 free): 2 torch "
                      'threads will run several times slower than the measured times; pass --threads 1 '
                      '(make demo ARGS="--threads 1")')


def test_make_demo_passes_its_args_to_the_quickstart() -> None:
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "demo", "ARGS=--seed 1 --threads 1", "DEMO_OUT=runs/qs1"], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=True)
    # (-n also lists the installation when the requirement files changed since the last one)
    assert [line for line in dry.stdout.splitlines() if "tooltune quickstart" in line][-1].endswith(
        "tooltune quickstart --out runs/qs1 --seed 1 --threads 1")
