"""The training stages both profiles run: SFT resumes from its progress checkpoint, a stopped GRPO stage
says why in its stage line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooltune.experiment.config import load_config

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "configs" / "quickstart_mini.yaml"


class Killed(Exception):
    pass


def test_sft_stage_resumes_from_its_progress_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed inside SFT continues from the last check and chooses the same warm start."""
    from tooltune.experiment import stages
    from tooltune.experiment.pipeline import Pipeline

    cfg = load_config(MINI, {"threads": 1, "train.sft.max_steps": 9})
    whole = Pipeline(tmp_path / "whole", cfg, say=lambda s: None)
    whole.run(stop_after="sft")
    killed = Pipeline(tmp_path / "killed", cfg, say=lambda s: None)
    killed.run(stop_after="model")
    original = stages.SFTLoop.train

    def killed_after_first_check(loop, *a, **kw):  # the progress checkpoint at step 3, then a kill
        def once(lp):
            kw["callback"](lp)
            raise Killed

        return original(loop, *a, **{**kw, "callback": once})

    monkeypatch.setattr(stages.SFTLoop, "train", killed_after_first_check)
    with pytest.raises(Killed):
        killed.run(stop_after="sft")
    monkeypatch.undo()
    assert (tmp_path / "killed" / "models" / "sft_progress" / "sft_state.pt").is_file()
    said: list[str] = []
    Pipeline(tmp_path / "killed", cfg, say=said.append).run(stop_after="sft")
    assert any("resuming SFT at step 3" in line for line in said)
    a, b = whole.result("sft"), killed.result("sft")
    assert [p["step"] for p in a["curve"]] == [p["step"] for p in b["curve"]] == [3, 6, 9]
    assert [p["loss"] for p in a["curve"]] == [p["loss"] for p in b["curve"]]
    assert a["chosen_step"] == b["chosen_step"]


def test_a_stopped_grpo_stage_says_why_in_its_stage_line() -> None:
    from tooltune.experiment.stages import headline

    res = {"steps": 6, "reward_first": 0.3, "reward_last": 0.0, "reward_window": 2}
    assert "stopped early" not in headline("grpo", {**res, "stopped_early": None})
    line = headline("grpo", {**res, "stopped_early": "diverged: the loss is nan at step 6"})
    assert line.endswith("; stopped early: diverged: the loss is nan at step 6")
