"""bench/ablations.py: the variants' rewards, the shards, the paired statistics, verdicts and table."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]


def _module(name: str):
    sys.path.insert(0, str(REPO))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(REPO))


def test_paired_difference_and_both_standard_errors_match_hand_computation() -> None:
    rep = _module("bench._ablations_report")
    a = {0: [1, 0, 1, 1], 1: [1, 1, 0, 1]}
    b = {0: [0, 0, 1, 0], 1: [1, 0, 0, 0], 7: [1, 1, 1, 1]}  # seed 7 has no partner: left out
    d = rep.paired(a, b)
    # per sample, averaged over seeds 0 and 1: (1+0)/2, (0+1)/2, (0+0)/2, (1+1)/2
    per_sample = [0.5, 0.5, 0.0, 1.0]
    mean = sum(per_sample) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in per_sample) / 3)
    assert d["diff"] == pytest.approx(mean) and d["seeds"] == 2
    assert d["se_samples"] == pytest.approx(sd / 2)
    per_seed = [0.5, 0.5]  # each seed: 2 more hits of 4
    assert d["per_seed"] == pytest.approx(per_seed) and d["se_seeds"] == pytest.approx(0.0)
    assert d["z"] == pytest.approx(mean / (sd / 2))  # the larger of the two errors
    assert math.isnan(rep.paired(a, {3: [0, 0, 0, 0]})["diff"])


def test_a_verdict_needs_two_standard_errors_in_the_papers_direction() -> None:
    rep = _module("bench._ablations_report")
    assert rep.verdict({"z": -2.5, "seeds": 3}, -1)[0] == "reproduced"
    assert rep.verdict({"z": 2.5, "seeds": 3}, -1)[0] == "not reproduced"
    assert "reversed" in rep.verdict({"z": 2.5, "seeds": 3}, -1)[1]
    assert rep.verdict({"z": -1.9, "seeds": 3}, -1)[0] == "inconclusive"
    assert rep.verdict({"z": float("nan"), "seeds": 3}, 1)[0] == "inconclusive"
    # one seed: the spread between training runs is unknown, so no verdict however large z is
    single = rep.verdict({"z": -6.0, "seeds": 1}, -1)
    assert single[0] == "inconclusive" and "one seed" in single[1]


def test_each_variant_is_a_valid_training_config_with_its_own_reward(tmp_path: Path) -> None:
    abl = _module("bench.ablations")
    from tooltune.config import set_key
    from tooltune.experiment.config import DEFAULT_CONFIG, load_config

    cfg = load_config(DEFAULT_CONFIG)
    base = SimpleNamespace(model_dir=lambda name: tmp_path / "models" / name)
    (tmp_path / "models" / "sft").mkdir(parents=True)  # the student's folder is checked at validation
    args = abl.parse_args([])
    seen = {}
    for variant in abl.VARIANTS:
        knobs = abl.variant_knobs(variant, 2, args, base, tmp_path / "runs" / f"{variant}_seed2")
        t = cfg.train
        for key, value in knobs.items():
            set_key(t, key, value)
        t.validate()
        assert t.run.seed == 2
        seen[variant] = dict(t.reward.components)
        if variant == "r2if":
            cer = t.reward.params["cer"]
            assert cer["student"] == {"model": str(tmp_path / "models" / "sft")}  # the warm start
            assert (cer["k"], cer["temperature"]) == (5, 0.4)  # R2IF's settings
            assert cer["cache_path"].endswith("r2if_seed2_v_base.sqlite")
        else:
            assert t.reward.params == {}
    assert seen["binary"] == {"binary": 1.0}
    assert seen["fine_grained"]["fine_grained"] == 1.0 and seen["fine_grained"]["binary"] == 0.0
    assert seen["no_format"] == {"correctness": 1.0, "format": 0.0}
    assert seen["r2if"] == {"binary": 3.0, "cer": 1.0, "smv": 1.0}


def test_shards_split_the_runs_and_options_are_checked() -> None:
    abl = _module("bench.ablations")
    every = abl.run_list(abl.parse_args(["--seeds", "0,1,2"]))
    assert len(every) == 12 and every[:4] == [(v, 0) for v in abl.VARIANTS]
    shards = [abl.run_list(abl.parse_args(["--seeds", "0,1,2", "--shard", f"{k}/2"])) for k in (0, 1)]
    assert sorted(shards[0] + shards[1]) == sorted(every) and not set(shards[0]) & set(shards[1])
    assert abl.run_list(abl.parse_args(["--seeds", "1", "--variants", "r2if,binary"])) == [
        ("binary", 1), ("r2if", 1)]
    assert abl.parse_args(["--mini"]).budget_s == 3.0 and abl.parse_args([]).budget_s == 150.0
    assert abl.parse_args([]).clock == "cpu"
    for bad in (["--shard", "2/2"], ["--shard", "x"], ["--variants", "binary,dense"]):
        with pytest.raises(SystemExit):
            abl.parse_args(bad)


def _result(variant: str, seed: int | None, held: list[int], unseen: list[int], ace: list[float],
            steps: int = 10) -> dict:
    def split(hits: list[int]) -> dict:
        return {"accuracy": sum(hits) / len(hits), "hits": hits}

    ev = {"heldout_exact": split(held), "heldout_calls": split(held), "unseen_tools_exact": split(unseen),
          "unseen_tools_calls": split(unseen),
          "ace": {"ace": sum(ace) / len(ace), "stderr": 0.01, "values": ace}}
    train = {"steps": steps, "train_cpu_s": 5.0, "train_wall_s": 6.0,
             "curve": [{"step": 0, "accuracy": 0.5}, {"step": 5, "accuracy": 0.6}],
             "log": [{"step": 5, "train_cpu_s": 2.5, "train_s": 3.0}]}
    return {"variant": variant, "seed": seed, "eval": ev, "train": train}


def test_the_table_puts_the_papers_numbers_beside_ours_with_a_verdict_per_claim(tmp_path: Path) -> None:
    rep = _module("bench._ablations_report")
    n = 40
    runs = {
        "warm_start": [_result("warm_start", None, [1] * 20 + [0] * 20, [0] * n, [0.0] * n)],
        "binary": [_result("binary", s, [1] * 30 + [0] * 10, [1] * 2 + [0] * 38, [0.1] * n) for s in (0, 1)],
        # fine-grained: 10 fewer hits on every seed -> a clear loss (the paper's direction)
        "fine_grained": [_result("fine_grained", s, [1] * 20 + [0] * 20, [0] * n, [0.1] * n) for s in (0, 1)],
    }
    for variant, results in runs.items():
        for r in results:
            d = tmp_path / "runs" / f"{variant}_seed{r['seed']}"
            d.mkdir(parents=True)
            (d / "result.json").write_text(json.dumps(r))
    meta = {"profile": "quickstart", "config": "configs/quickstart.yaml", "warm_start_step": 500,
            "budget_s": 150, "clock": "cpu", "threads": 1}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    assert rep.summarize_dir(tmp_path) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())["summary"]
    fg = summary["variants"]["fine_grained"]
    assert fg["heldout_calls_vs_binary"]["diff"] == pytest.approx(-0.25)
    assert fg["heldout_calls_vs_warm"]["diff"] == pytest.approx(0.0)
    claims = {c["variant"]: c for c in summary["claims"]}
    assert claims["fine_grained"]["verdict"] == "reproduced"
    assert claims["no_format"]["verdict"] == "inconclusive" and claims["no_format"]["reason"] == "not run"
    text = (tmp_path / "summary.md").read_text()
    assert "84.82" in text and "83.74 / 82.58" in text and "cpu clock" in text
    assert "**reproduced**" in text
    assert (tmp_path / "ablations.png").stat().st_size > 0
    assert rep.ace_summary([0.0, 1.0])["stderr"] == pytest.approx(0.5)
