"""bench/run_stages.py runs named stages of a run folder as the quickstart would (a finished one is
skipped), and refuses a stage the profile does not have, naming it, before it touches the folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import bench_module

from tooltune.cli import main

MINI = Path(__file__).resolve().parents[1] / "configs" / "quickstart_real_smollm2_mini.yaml"


def test_named_stages_run_once_and_unknown_ones_are_named(tmp_path: Path, tiny_model_dir: Path,
                                                          shared_data_dir: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "run"
    args = ["quickstart", "--config", str(MINI), "--model", str(tiny_model_dir), "--out", str(out),
            "--benchmarks.data_dir", str(shared_data_dir), "--real_data.eval_data", str(shared_data_dir),
            "--stop-after", "data"]
    assert main(args) == 0
    module = bench_module("run_stages")
    monkeypatch.setattr(sys, "argv", ["run_stages.py", str(out), "model", "nope"])
    with pytest.raises(SystemExit, match="nope not a stage of the real profile"):
        module.main()
    assert not (out / "stages" / "model.json").exists()
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["run_stages.py", str(out), "model"])
    module.main()
    first = json.loads((out / "stages" / "model.json").read_text())
    module.main()
    assert "model: already finished, skipping" in capsys.readouterr().out
    assert json.loads((out / "stages" / "model.json").read_text()) == first
    monkeypatch.setattr(sys, "argv", ["run_stages.py", str(tmp_path / "none"), "model"])
    with pytest.raises(SystemExit, match="no config.yaml"):
        module.main()
