"""The real profile's screen stage: the warm start's k answers per training prompt decide GRPO's prompts,
every prompt accounted for, resumed from its per-prompt cache, and charged to GRPO's compute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooltune.cli import main
from tooltune.config import ConfigError
from tooltune.experiment.config import load_config
from tooltune.experiment.pipeline import Pipeline
from tooltune.experiment.real import real_profile
from tooltune.schema import read_jsonl

MINI = Path(__file__).resolve().parents[1] / "configs" / "quickstart_real_smollm2_mini.yaml"


def _overrides(model: Path, data: Path, *extra: str) -> list[str]:
    return ["--model", str(model), "--benchmarks.data_dir", str(data), "--real_data.eval_data", str(data),
            "--benchmarks.suites", "{bfcl: irrelevance}", "--benchmarks.subset", "{bfcl: 1}", *extra]


def _args(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return ["quickstart", "--config", str(MINI), "--out", str(out), *_overrides(model, data, *extra)]


def test_the_screen_keeps_the_mixed_prompts_for_grpo_and_accounts_for_every_prompt(
    tmp_path: Path, tiny_model_dir: Path, shared_data_dir: Path, capsys
) -> None:
    # the warm start of a run without the screen; the screen belongs to a branch from it (it reads GRPO's
    # sampling settings, which branches may change)
    src, out = tmp_path / "src", tmp_path / "run"
    assert main([*_args(tiny_model_dir, shared_data_dir, src), "--stop-after", "eval_sft"]) == 0
    identity = json.loads((src / "run.json").read_text())
    del identity["config"]["screen"]  # a source made before the section existed branches all the same
    (src / "run.json").write_text(json.dumps(identity))
    args = _args(tiny_model_dir, shared_data_dir, out, "--screen.enabled", "true", "--screen.k", "4",
                 "--branch-from", str(src))
    assert main([*args, "--stop-after", "eval_sft"]) == 0  # the branch made, nothing of its own run yet
    train = read_jsonl(str(src / "data" / "train.jsonl"))
    # rewards of a screen cut short: the stage resumes from them without generating anything
    pattern = [[1.0] * 4, [0.0] * 4, [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]
    (out / "screen").mkdir(parents=True)
    with open(out / "screen" / "rewards.jsonl", "w", encoding="utf-8") as f:
        for i, s in enumerate(train):  # the first half made where costs were recorded: 2 CPU s each
            cost = {"cpu_s": 2.0, "wall_s": 3.0} if i < len(train) // 2 else {}
            f.write(json.dumps({"sample_id": s.id, "rewards": pattern[i % 4], **cost}) + "\n")
    assert main(args) == 0
    screen = json.loads((out / "stages" / "screen.json").read_text())
    # the cached answers cost what they cost where they were made: the screen's cost counts them
    assert screen["cached_answers"] == len(train)
    assert screen["cached_without_cost"] == len(train) - len(train) // 2
    assert screen["cpu_s"] >= 2.0 * (len(train) // 2) and screen["wall_s"] >= 3.0 * (len(train) // 2)
    assert screen["settings"]["k"] == 4 and screen["settings"]["prompt"]["template"]
    n = len(train)
    expected = {"all_right": len(range(0, n, 4)), "all_wrong": len(range(1, n, 4))}
    assert {k: screen[k] for k in expected} == expected
    assert screen["in"] == n and screen["kept"] == screen["mixed"] == n - sum(expected.values())
    assert sum(screen["successes"].values()) == n and screen["successes"]["1"] == len(range(2, n, 4))
    kept = read_jsonl(str(out / "screen" / "grpo_train.jsonl"))
    assert [s.id for s in kept] == [s.id for i, s in enumerate(train) if i % 4 in (2, 3)]
    assert {s.meta["policy_success_rate"] for s in kept} == {0.25, 0.75}
    rejected = [json.loads(line) for line in (out / "screen" / "rejected.jsonl").open()]
    assert {r["reason"] for r in rejected} == {"always_solved", "never_solved"}
    assert len(rejected) + len(kept) == n  # every prompt kept or rejected with its reason
    # GRPO read the screened prompts, and continued SFT got the screen's CPU time on top of GRPO's
    train_yaml = (out / "grpo" / "config.yaml").read_text()
    assert "grpo_train.jsonl" in train_yaml
    continued = json.loads((out / "stages" / "sft_continued.json").read_text())
    grpo = json.loads((out / "stages" / "grpo.json").read_text())
    assert continued["screen_s"] == screen["cpu_s"] > 0
    assert continued["budget_s"] == pytest.approx(grpo["train_cpu_s"] + screen["cpu_s"])
    assert "GRPO trains on" in capsys.readouterr().out
    branched = json.loads((out / "branch.json").read_text())
    assert "screen" not in branched["stages"] and "eval_sft" in branched["stages"]
    report = json.loads((out / "report.json").read_text())
    assert report["screen"]["mixed"] == screen["mixed"]
    assert f"GRPO trained on the {screen['mixed']} mixed ones" in (out / "report.md").read_text()


def test_a_screen_that_leaves_no_prompt_with_a_gradient_stops_with_the_key_to_change(
    tmp_path: Path, tiny_model_dir: Path, shared_data_dir: Path
) -> None:
    out = tmp_path / "run"
    extra = ("--screen.enabled", "true", "--screen.k", "2", "--train.grpo.max_completion_length", "8")
    assert main([*_args(tiny_model_dir, shared_data_dir, out, *extra), "--stop-after", "eval_sft"]) == 0
    cfg = load_config(MINI, _overrides(tiny_model_dir, shared_data_dir, *extra))
    p = Pipeline(out, cfg, profile=real_profile())
    # a random tiny model writes no well-formed call in 8 tokens: every prompt is never solved
    with pytest.raises(ConfigError, match="screen.enabled: .* no prompt with a gradient"):
        p.run_stage("screen")
    cached = (out / "screen" / "rewards.jsonl").read_text().splitlines()
    assert len(cached) == len(read_jsonl(str(out / "data" / "train.jsonl")))  # the work is kept for a rerun
    assert not (out / "stages" / "screen.json").exists()
    assert not (out / "screen" / "grpo_train.jsonl").exists()


def test_off_the_screen_gives_grpo_every_training_prompt(tmp_path: Path) -> None:
    cfg = load_config(MINI)
    assert cfg.screen.enabled is False
    p = Pipeline(tmp_path / "run", cfg, profile=real_profile())
    assert p.train_config("grpo").data.train == str(tmp_path / "run" / "data" / "train.jsonl")
    on = Pipeline(tmp_path / "on", load_config(MINI, {"screen.enabled": True}), profile=real_profile())
    assert on.train_config("grpo").data.train == str(tmp_path / "on" / "screen" / "grpo_train.jsonl")


def test_irrelevance_variants_follow_the_kept_prompts_with_their_called_tools_removed(
    tmp_path: Path, tiny_model_dir: Path, shared_data_dir: Path
) -> None:
    src, out = tmp_path / "src", tmp_path / "run"
    assert main([*_args(tiny_model_dir, shared_data_dir, src), "--stop-after", "sft"]) == 0
    args = _args(tiny_model_dir, shared_data_dir, out, "--screen.enabled", "true", "--screen.k", "2",
                 "--screen.irrelevance_variants", "1.0", "--branch-from", str(src))
    assert main([*args, "--stop-after", "sft"]) == 0
    train = read_jsonl(str(src / "data" / "train.jsonl"))
    (out / "screen").mkdir(parents=True)
    with open(out / "screen" / "rewards.jsonl", "w", encoding="utf-8") as f:
        for s in train:  # every prompt mixed
            f.write(json.dumps({"sample_id": s.id, "rewards": [1.0, 0.0]}) + "\n")
    assert main([*args, "--stop-after", "screen"]) == 0
    screen = json.loads((out / "stages" / "screen.json").read_text())
    kept = read_jsonl(str(out / "screen" / "grpo_train.jsonl"))
    variants = [s for s in kept if s.meta.get("augmented") == "irrelevance"]
    by_id = {s.id: s for s in train}
    # a variant for each single-turn prompt with a call that offers a tool besides the ones it calls
    eligible = [s for s in train if s.answer and all(m["role"] == "user" for m in s.messages)
                and {t.name for t in s.tools} - {c.name for c in s.answer}]
    assert variants and len(variants) == len(eligible) == screen["irrelevance_variants"]
    assert screen["mixed"] == len(train) and screen["kept"] == len(train) + len(variants)
    for i, s in enumerate(kept):
        if s in variants:
            origin = by_id[s.meta["origin"]]
            assert kept[i - 1].id == origin.id and s.id == f"{origin.id}#irrelevant"
            assert s.answer == [] and s.messages == origin.messages
            called = {c.name for c in origin.answer}
            assert {t.name for t in s.tools} == {t.name for t in origin.tools} - called
    assert [s.id for s in kept if s not in variants] == [s.id for s in train]
    assert f"and {len(variants)} irrelevance variants of them" in (out / "report.md").read_text()
