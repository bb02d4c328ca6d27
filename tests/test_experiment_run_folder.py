"""A run folder is one run with one writer: a second process is refused while the first holds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_rundir import lock_holder

from tooltune.experiment.config import load_config
from tooltune.experiment.run_folder import RunFolder
from tooltune.experiment.synthetic import synthetic_profile
from tooltune.rundir import RunFolderBusy

MINI = Path(__file__).resolve().parents[1] / "configs" / "quickstart_mini.yaml"


def test_one_process_writes_a_quickstart_folder(tmp_path: Path) -> None:
    with lock_holder(tmp_path / "q"), pytest.raises(RunFolderBusy, match="in use by another run"):
        RunFolder(tmp_path / "q", load_config(MINI, {"threads": 1}), print, synthetic_profile())
