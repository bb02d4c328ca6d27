"""The experiment pipeline on the synthetic mini profile: it resumes, reports, writes a reproducible
training config, and refuses another run's settings in its folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooltune.experiment.config import load_config
from tooltune.rundir import RunMismatch

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "configs" / "quickstart_mini.yaml"


def test_mini_pipeline_resumes_reports_and_writes_a_reproducible_training_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.synthetic import STAGES
    from tooltune.training.config import load_config as load_train_config
    from tooltune.training.sft import SFTLoop

    phases: dict[str, dict] = {}
    train = SFTLoop.train

    def recorded(loop, *args, **kw):
        phases[kw.get("progress")] = kw
        return train(loop, *args, **kw)

    monkeypatch.setattr(SFTLoop, "train", recorded)
    cfg = load_config(MINI, {"threads": 1})
    said: list[str] = []
    Pipeline(tmp_path, cfg, say=said.append).run(stop_after="eval_sft")
    partial = json.loads((tmp_path / "report.json").read_text())
    assert "sft_accuracy" in partial and "grpo_accuracy" not in partial
    said.clear()
    report = Pipeline(tmp_path, cfg, say=said.append).run()
    skipped = [line for line in said if "already finished" in line]
    assert len(skipped) == STAGES.index("eval_sft") + 1  # nothing finished was redone
    for key in (
        "sft_accuracy",
        "grpo_accuracy",
        "sft_continued_accuracy",
        "sft_pass_at_8",
        "sft_se",
        "grpo_vs_sft",
        "grpo_vs_sft_continued",
        "timings",
        "seed",
        "environment",
    ):
        assert key in report, key
    per_cat = report["grpo_eval"]["heldout"]["per_category"]
    assert sum(v["n"] for v in per_cat.values()) == cfg.task.n_heldout
    assert report["grpo"]["steps"] == cfg.train.grpo.max_steps
    # equal compute: continued SFT got GRPO's training CPU time, evaluated at GRPO's curve times
    assert report["clock"]["name"] == "cpu" and "process_time" in report["clock"]["counts"]
    assert report["sft_continued"]["budget_s"] == report["grpo"]["train_cpu_s"] > 0
    assert report["sft_continued"]["train_s"] >= report["sft_continued"]["budget_s"]
    continued = phases["continued SFT"]  # bounded by the budget, not by a step count
    assert "steps" not in continued and continued["budget"].budget == report["sft_continued"]["budget_s"]
    cont = json.loads((tmp_path / "stages" / "sft_continued.json").read_text())
    assert cont["clock"] == "cpu" and cont["curve"][0]["t"] == 0.0 and len(cont["curve"]) >= 2
    assert [p["t"] for p in cont["curve"]] == sorted(p["t"] for p in cont["curve"])
    assert "Equal compute: continued SFT got GRPO's training time on the cpu clock" in (
        tmp_path / "report.md").read_text()
    for key in ("grpo_vs_sft_unseen_tools", "sft_continued_vs_sft_unseen_tools",
                "grpo_vs_sft_continued_unseen_tools"):
        assert set(report[key]) == {"diff", "se", "z"}, key
    grpo = json.loads((tmp_path / "stages" / "grpo.json").read_text())
    assert [p["step"] for p in grpo["curve"]] == [0, 1, 2]  # validation curve every step (mini)
    assert all(r["train_s"] <= grpo["train_wall_s"] for r in grpo["log"])
    sft = json.loads((tmp_path / "stages" / "sft.json").read_text())
    assert [p["step"] for p in sft["curve"]] == [3, 6] and sft["chosen_step"] in (3, 6)
    assert (tmp_path / "report.md").read_text().startswith("# tooltune quickstart report")
    assert report["plots"] == ["reward.png", "accuracy.png", "zero_variance.png", "time_split.png"]
    for png in report["plots"]:
        assert (tmp_path / png).stat().st_size > 0
    # one definition of the training reward: the report, the stage's headline and `tooltune report`
    from tooltune.training.report import summarize as run_summary

    again = run_summary(tmp_path / "grpo")
    assert (report["grpo"]["reward_first"], report["grpo"]["reward_last"]) == (again["reward_first"],
                                                                                again["reward_last"])
    assert f"(mean of the first / last {again['reward_window']} steps)" in " ".join(said)
    assert [p.get("n") for p in grpo["curve"]] == [cfg.task.n_val] * 3  # each point's sample count
    # DIR/train.yaml: `tooltune train` runs SFT to the chosen warm start, then GRPO, from the base model
    train = load_train_config(tmp_path / "train.yaml")
    assert train.sft.enabled and train.grpo.enabled and train.sft.max_steps == sft["chosen_step"]
    assert train.model.name_or_path == str(tmp_path / "models" / "base")
    assert train.data.train == str(tmp_path / "data" / "train.jsonl") and train.run.seed == cfg.seed
    # the folder's config reads back as the same settings, and another one is refused
    assert load_config(tmp_path / "config.yaml").to_dict() == cfg.to_dict()
    with pytest.raises(RunMismatch, match="holds another run .*max_steps"):
        Pipeline(tmp_path, load_config(MINI, {"threads": 1, "train.grpo.max_steps": 5}))
