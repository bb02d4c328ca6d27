"""The quickstart's real profile at its smallest sizes on real files (ToolRL's shipped copy, BFCL from
bfcl-eval, API-Bank and ACEBench from the shared data folder) with a tiny model: every stage, the
split by tool domain, fixed benchmark subsets, the report's scores, paired differences and phase times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooltune.cli import main
from tooltune.config import ConfigError
from tooltune.experiment.config import load_config
from tooltune.experiment.memory import status_kb
from tooltune.schema import read_jsonl

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "quickstart_real_smollm2.yaml"
MINI = REPO / "configs" / "quickstart_real_smollm2_mini.yaml"


def test_the_recipe_keeps_the_sizes_that_can_show_an_effect() -> None:
    c = load_config(RECIPE)
    assert (c.profile, c.model, c.clock) == ("real", "models/smollm2-135m-instruct", "cpu")
    assert c.real_data.source == "toolrl" and c.real_data.min_train == 300
    g = c.train.grpo
    assert (g.prompts_per_step, g.num_generations) == (4, 8)
    assert c.train.reward.components == {"binary": 1.0} and c.train.data.template == "tool_n1"
    assert g.temperature == 0.7  # Tool-N1's
    # measured on the real model (docs/BENCHMARKS.md): 8 steps at lr 1e-5 on the prompts the warm start
    # solves sometimes (screen at k 4), equal-reward groups dropped, m 4 of 8 rollouts kept
    assert (g.max_steps, g.learning_rate, c.screen.enabled, c.screen.k) == (8, 1e-5, True, 4)
    d = c.train.downsample
    assert (d.enabled, d.m, d.drop_zero_variance) == (True, 4, True)
    b = c.benchmarks
    assert set(b.suites) == {"bfcl", "apibank", "acebench"}
    assert b.suites["bfcl"] == "non_live,live" and b.suites["apibank"] == "level-1,level-2"
    assert all(cat.startswith("normal_") for cat in b.suites["acebench"].split(","))
    assert len(b.suites["acebench"].split(",")) == 12
    assert b.subset == {"bfcl": 15, "apibank": 100, "acebench": 17}  # about 200 entries each
    with pytest.raises(ConfigError, match="benchmarks.subset: nope is not in benchmarks.suites"):
        load_config(RECIPE, {"benchmarks.subset": "{nope: 3}"})


def test_a_folder_without_a_model_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    assert main(["quickstart", "--config", str(MINI), "--model", str(tmp_path / "none"),
                 "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model: " in err[0] and "make smollm2" in err[0]
    assert not (tmp_path / "run").exists()


def test_the_real_profile_runs_every_stage_and_reports_scores_pairs_and_phase_times(
    tmp_path: Path, tiny_model_dir: Path, shared_data_dir: Path, capsys
) -> None:
    out = tmp_path / "run"
    args = ["quickstart", "--config", str(MINI), "--model", str(tiny_model_dir), "--out", str(out),
            "--benchmarks.data_dir", str(shared_data_dir), "--real_data.eval_data", str(shared_data_dir)]
    assert main(args) == 0
    stages = ("data", "model", "eval_base", "sft", "eval_sft", "screen", "grpo", "eval_grpo", "sft_continued",
              "eval_sft_continued")
    assert all((out / "stages" / f"{s}.json").is_file() for s in stages)
    # the split by tool domain: no unseen-tools sample offers a tool any training sample offers
    splits = {k: read_jsonl(str(out / "data" / f"{k}.jsonl")) for k in ("train", "val", "unseen_tools")}
    data = json.loads((out / "stages" / "data.json").read_text())
    assert data["sizes"] == {k: len(v) for k, v in splits.items()} and len(splits["unseen_tools"]) > 0
    assert data["sources"]["toolrl"]["records_in"] == 60
    assert set(data["decontamination"]["samples_rejected"]) == {"bfcl", "apibank", "acebench"}
    trained = {t.name.lower() for s in splits["train"] + splits["val"] for t in s.tools}
    assert not trained & {t.name.lower() for s in splits["unseen_tools"] for t in s.tools}
    # every checkpoint on the same fixed entries of each benchmark, with standard errors
    entries = {}
    for ckpt in ("base", "sft", "grpo", "sft_continued"):
        for bench in ("bfcl", "apibank", "acebench"):
            summary = json.loads((out / "evals" / ckpt / bench / "summary.json").read_text())
            assert summary["subset"]["per_category"] == 2 and summary["seeds"] == [0]
            assert "standard_errors" in summary
            verdicts = (out / "evals" / ckpt / bench / "verdicts.jsonl").read_text().splitlines()
            entries.setdefault(bench, set()).add(frozenset(json.loads(v)["id"] for v in verdicts))
    assert all(len(ids) == 1 for ids in entries.values())  # the same entries for every checkpoint
    assert len(next(iter(entries["acebench"]))) > 4  # two multi-turn dialogues kept whole, with their turns
    report = json.loads((out / "report.json").read_text())
    assert list(report["scores"]) == ["base", "sft", "grpo", "sft_continued"]
    assert set(report["scores"]["grpo"]["apibank"]) == {"categories.level-1.accuracy", "overall"}
    assert all(set(v) == {"value", "se"} for v in report["scores"]["base"]["bfcl"].values())
    assert report["plots"] == ["checkpoints.png"] and (out / "checkpoints.png").stat().st_size > 0
    assert report["sft_targets"]["n"] == data["sizes"]["train"]  # every target measured against the budgets
    budgets = {"benchmarks.max_new_tokens", "train.grpo.max_completion_length",
               "train.diagnostics.eval_max_new_tokens"}
    assert set(report["sft_targets"]["over"]) == budgets
    pairs = {(r["b"], r["a"], r["benchmark"]) for r in report["paired"]}
    assert ("grpo", "sft_continued", "bfcl") in pairs and ("sft", "base", "unseen_tools") in pairs
    phases = [p["phase"] for p in report["phases"]]
    for phase in ("data", "model load", "sft", "  GRPO rollout", "  GRPO update", "sft_continued",
                  "eval_base: bfcl (4 entries)", "eval_sft_continued: apibank (2 entries)"):
        assert phase in phases, phase
    md = (out / "report.md").read_text()
    assert "| benchmark | score | base | sft | grpo | sft_continued |" in md
    assert "GRPO vs continued SFT at equal training time" in md and "\nTimings\n" in md
    assert "- bfcl: 4 entries, at most 2 per category, seed 0" in md
    # each phase's peak resident memory, and a progress bar per benchmark and for the unseen tools
    peaks = {p["phase"]: p["peak_rss_mb"] for p in report["phases"]}
    if status_kb("VmRSS") is not None:
        measured = ("data", "sft", "eval_base: bfcl (4 entries)", "eval_base: unseen tools")
        assert all(peaks[p] > 0 for p in measured)
    assert "| phase | wall (s) | CPU (s) | peak memory (MB) |" in md
    err = capsys.readouterr().err
    assert "bfcl: 100%" in err and "acebench: 100%" in err and "unseen tools: 100%" in err
    # running again resumes: every stage is finished and skipped
    assert main(args) == 0
    assert capsys.readouterr().out.count("already finished, skipping") == len(stages)


def test_stop_after_takes_the_real_profiles_own_stages(tmp_path: Path, tiny_model_dir: Path,
                                                       shared_data_dir: Path, capsys) -> None:
    args = ["quickstart", "--config", str(MINI), "--model", str(tiny_model_dir),
            "--benchmarks.data_dir", str(shared_data_dir), "--real_data.eval_data", str(shared_data_dir)]
    assert main([*args, "--out", str(tmp_path / "bad"), "--stop-after", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a stage of the real profile" in err[0] and "eval_base" in err[0]
    out = tmp_path / "run"
    assert main([*args, "--out", str(out), "--stop-after", "eval_base"]) == 0
    assert sorted(f.stem for f in (out / "stages").glob("*.json")) == ["data", "eval_base", "model"]
