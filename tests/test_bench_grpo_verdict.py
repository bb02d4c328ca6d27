"""bench/grpo_verdict.py: paired differences of GRPO checkpoints against the warm start and continued SFT
from their API-Bank verdicts and unseen-tools hits, and the goal judged from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import bench_module

CONFIG = {"benchmarks": {"headline": {"apibank": "overall"}}}


def _checkpoint(tmp_path: Path, label: str, valid: list[bool], hits: list[float]) -> Path:
    """An evaluation result of API-Bank level-1 entries (`valid` per entry) and the unseen-tools split."""
    run = tmp_path / label / "apibank"
    run.mkdir(parents=True)
    records = [{"id": f"level-1/Calc-level-1-{i}.jsonl#0", "category": "level-1", "valid": v, "seed": 0}
               for i, v in enumerate(valid)]
    (run / "verdicts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    share = sum(valid) / len(valid)
    res: dict[str, Any] = {
        "benchmarks": {"apibank": {"run": str(run), "standard_errors": {},
                                   "scores": {"overall": share, "categories.level-1.accuracy": share},
                                   "headline_key": "overall", "headline": share, "headline_se": 0.01}},
        "unseen_tools": {"accuracy": sum(hits) / len(hits), "se": 0.1, "n": len(hits), "hits": hits},
    }
    path = tmp_path / f"{label}.json"
    path.write_text(json.dumps(res), encoding="utf-8")
    return path


def test_paired_differences_and_the_goal_follow_the_verdicts(tmp_path: Path) -> None:
    mod = bench_module("grpo_verdict")
    n = 40
    sft = _checkpoint(tmp_path, "sft", [i < 4 for i in range(n)], [0.0, 1.0, 0.0, 0.0])
    # GRPO solves 12 more entries and keeps the 4 SFT solved: +30 points, paired
    grpo = _checkpoint(tmp_path, "grpo", [i < 16 for i in range(n)], [1.0, 1.0, 0.0, 0.0])
    cont = _checkpoint(tmp_path, "cont", [i < 20 for i in range(n)], [0.0, 1.0, 1.0, 0.0])
    ckpts = mod.read_checkpoints([f"sft={sft}", f"grpo={grpo}", f"cont={cont}"])

    v = mod.verdict(CONFIG, ckpts, "sft", ["grpo"], None, 0.05, 2.0, ["apibank"])
    row = next(r for r in v["paired"] if (r["b"], r["a"], r["benchmark"]) == ("grpo", "sft", "apibank"))
    d = row["scores"]["overall"]
    assert row["units"] == n and d["delta"] == pytest.approx(0.30)
    assert d["z"] > 2 and v["checks"][0]["met"] and v["goal_met"]
    unseen = next(r for r in v["paired"] if (r["b"], r["benchmark"]) == ("grpo", "unseen_tools"))
    assert unseen["scores"]["accuracy"]["delta"] == pytest.approx(0.25)

    # continued SFT solves more than GRPO: the same GRPO now misses the goal, by the rival
    v = mod.verdict(CONFIG, ckpts, "sft", ["grpo"], "cont", 0.05, 2.0, ["apibank"])
    check = v["checks"][0]
    assert check["vs_rival"]["delta"] == pytest.approx(-0.10)
    assert not check["met"] and not v["goal_met"]
    text = mod.markdown(v)
    assert "| grpo − cont |" in text and "Goal not met." in text
    assert "inside the headline" not in text  # the config names no score beside the headline
    # a score the config lists beside the headline, with both checkpoints' values: 4 and 16 of 40 solved
    levels = {"benchmarks": {"headline": {"apibank": "overall,categories.level-1.accuracy"}}}
    text = mod.markdown(mod.verdict(levels, ckpts, "sft", ["grpo"], None, 0.05, 2.0, ["apibank"]))
    assert "| grpo − sft | apibank: categories.level-1.accuracy | 10.0 | 40.0 | +30.0 ±" in text


def test_a_gain_below_the_goal_or_its_z_is_not_met(tmp_path: Path) -> None:
    mod = bench_module("grpo_verdict")
    n = 40
    sft = _checkpoint(tmp_path, "sft", [i < 4 for i in range(n)], [0.0])
    grpo = _checkpoint(tmp_path, "grpo", [i < 5 for i in range(n)], [0.0])  # +2.5 points
    ckpts = mod.read_checkpoints([f"sft={sft}", f"grpo={grpo}"])
    v = mod.verdict(CONFIG, ckpts, "sft", ["grpo"], None, 0.05, 2.0, ["apibank"])
    assert v["checks"][0]["vs_baseline"]["delta"] == pytest.approx(0.025)
    assert not v["goal_met"]
    assert mod.verdict(CONFIG, ckpts, "sft", ["grpo"], None, 0.02, 0.5, ["apibank"])["goal_met"]


def test_bad_checkpoint_specs_name_what_is_wrong(tmp_path: Path) -> None:
    mod = bench_module("grpo_verdict")
    with pytest.raises(ValueError, match="expected LABEL=FILE"):
        mod.read_checkpoints(["sft"])
    with pytest.raises(ValueError, match="grpo: .* does not exist"):
        mod.read_checkpoints([f"grpo={tmp_path / 'missing.json'}"])
    (tmp_path / "other.json").write_text(json.dumps({"steps": 3}), encoding="utf-8")
    with pytest.raises(ValueError, match="grpo: .* is not an evaluation result"):
        mod.read_checkpoints([f"grpo={tmp_path / 'other.json'}"])
    sft = _checkpoint(tmp_path, "sft", [True, False], [1.0])
    with pytest.raises(ValueError, match="'grpo' is not a --checkpoint label"):
        mod.verdict(CONFIG, mod.read_checkpoints([f"sft={sft}"]), "sft", ["grpo"], None, 0.05, 2.0,
                    ["apibank"])
