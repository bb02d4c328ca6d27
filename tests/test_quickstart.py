"""Quickstart: task design invariants, statistics, and the staged pipeline at a miniature budget."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooltune.quickstart import evaluate as ev
from tooltune.quickstart.task import (
    TRAIN_TOOLS,
    UNSEEN_TOOLS,
    TaskConfig,
    make_multi_step_splits,
    make_splits,
    sft_calls,
)

UNSEEN = {t.name for t in UNSEEN_TOOLS}
TRAIN = {t.name for t in TRAIN_TOOLS}


def _key(s) -> str:
    return s.messages[-1]["content"] + "|" + ",".join(sorted(t.name for t in s.tools))


def test_default_splits_have_the_promised_sizes_and_are_disjoint() -> None:
    sp = make_splits(TaskConfig())
    assert len(sp["heldout"]) >= 1000
    train_keys = {_key(s) for s in sp["train"]}
    assert not train_keys & {_key(s) for s in sp["heldout"]}
    assert not train_keys & {_key(s) for s in sp["val"]}
    # unseen-tools samples all need a tool that no training sample offers
    assert not {t.name for s in sp["train"] for t in s.tools} & UNSEEN
    assert all({t.name for t in s.tools} & UNSEEN for s in sp["unseen_tools"])
    assert all(c.name in UNSEEN for s in sp["unseen_tools"] for c in s.answer)


def test_demonstrations_are_imperfect_only_in_train_and_only_in_the_designed_ways() -> None:
    sp = make_splits(TaskConfig(seed=3, n_train=3000))
    noisy = [s for s in sp["train"] if sft_calls(s) != list(s.answer)]
    assert 0.1 < len(noisy) / len(sp["train"]) < 0.3
    for s in noisy:
        demo, gold = sft_calls(s), list(s.answer)
        if len(demo) < len(gold):  # the second parallel call was dropped
            assert s.category == "parallel" and len(demo) == 1
        for i, (d, g) in enumerate(zip(demo, gold)):
            info = s.meta["decisions"][min(i, len(s.meta["decisions"]) - 1)]
            assert d.name == g.name
            for k in (k for k in g.arguments if d.arguments[k] != g.arguments[k]):
                # only a paraphrased enum, and only towards its default value
                assert info["paraphrase"] and k == info["enum"] and d.arguments[k] == info["default"]
    for split in ("val", "heldout", "unseen_tools"):
        assert all("sft_answer" not in s.meta for s in sp[split])


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000))
def test_every_answer_calls_offered_tools_with_valid_arguments(seed: int) -> None:
    sp = make_splits(TaskConfig(seed=seed, n_train=60, n_val=5, n_heldout=30, n_unseen=10))
    for s in (x for v in sp.values() for x in v):
        offered = {t.name: t for t in s.tools}
        assert (s.category == "irrelevance") == (not s.answer)
        if s.category in ("parallel", "parallel_multiple"):
            assert len(s.answer) == 2
        for c in s.answer:
            spec = offered[c.name]
            assert set(c.arguments) == set(spec.required)
            for k, v in c.arguments.items():
                prop = spec.properties[k]
                assert isinstance(v, int if prop["type"] == "integer" else str)
                assert v in prop.get("enum", [v])
        if s.category == "irrelevance":
            wanted = s.meta["decisions"][0]["tool"]
            assert wanted not in offered and wanted in TRAIN


def test_multi_step_chains_copy_the_tool_result_and_end_with_no_call() -> None:
    sp = make_multi_step_splits(TaskConfig(n_train=30, n_val=6, n_heldout=9, n_unseen=5))
    chain = sp["train"][:3]
    assert [len(s.messages) for s in chain] == [1, 3, 5]
    result = json.loads(chain[1].messages[2]["content"])
    assert list(result.values())[0] in chain[1].answer[0].arguments.values()
    assert chain[2].answer == []
    assert all(s.category == "multi_step" for s in sp["heldout"])


def test_binomial_and_paired_statistics_match_hand_computation() -> None:
    b = ev.binomial([1, 0, 1, 1])
    assert b["accuracy"] == 0.75 and math.isclose(b["se"], math.sqrt(0.75 * 0.25 / 4))
    d = ev.paired([1, 1, 1, 0], [0, 1, 0, 0])  # differences 1, 0, 1, 0: mean 0.5, sd 0.57735
    assert d["diff"] == 0.5
    assert math.isclose(d["se"], math.sqrt((4 * 0.25) / 3 / 4))
    assert math.isclose(d["z"], 0.5 / d["se"])


def test_cli_registers_quickstart_and_bench() -> None:
    from tooltune import bench_commands
    from tooltune.quickstart import commands

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    commands.register(sub)
    bench_commands.register(sub)
    args = parser.parse_args(["quickstart", "--out", "x", "--seed", "2", "--set", "grpo_steps=3"])
    assert args.seed == 2 and args.set == ["grpo_steps=3"] and callable(args.func)
    args = parser.parse_args(["bench", "efficiency", "--out", "y"])
    assert args.name == "efficiency" and args.args == ["--out", "y"]
    assert "efficiency" in bench_commands.available()


def _bench_efficiency():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "bench" / "efficiency.py"
    spec = importlib.util.spec_from_file_location("bench_efficiency", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_efficiency_variants_get_only_their_techniques_and_the_lr_scale() -> None:
    import argparse

    mod = _bench_efficiency()
    args = argparse.Namespace(
        filter_k=2, filter_reset=True, downsample_m=4, advantage="full", lr_scale=0.5, vanilla_lr_scale=1.0
    )
    assert mod.variant_knobs("vanilla", args, 1e-3) == {
        "filter_k": 0,
        "filter_reset": True,
        "downsample_m": 0,
        "advantage_mode": "full",
        "lr": 1e-3,
    }
    both = mod.variant_knobs("filter+downsample", args, 1e-3)
    assert (both["filter_k"], both["downsample_m"], both["lr"]) == (2, 4, 5e-4)
    assert mod.variant_knobs("filter_only", args, 1e-3)["downsample_m"] == 0
    assert mod.variant_knobs("downsample_only", args, 1e-3)["filter_k"] == 0
    args.vanilla_lr_scale = 0.5  # the lr control: vanilla at (b)'s learning rate
    assert mod.variant_knobs("vanilla", args, 1e-3)["lr"] == 5e-4


def test_efficiency_speedup_is_time_to_vanillas_best_over_time_to_match_it() -> None:
    mod = _bench_efficiency()
    a = [
        {"train_s": 0, "accuracy": 0.3},
        {"train_s": 100, "accuracy": 0.4},
        {"train_s": 200, "accuracy": 0.5},
    ]
    b = [{"train_s": 0, "accuracy": 0.3}, {"train_s": 80, "accuracy": 0.5}, {"train_s": 160, "accuracy": 0.6}]
    assert mod.speedup(a, b) == {"target_accuracy": 0.5, "time_a_s": 200, "time_b_s": 80, "speedup": 2.5}
    assert mod.speedup(a, a[:2])["speedup"] is None  # (b) never reached (a)'s best
    flat = [{"train_s": 0, "accuracy": 0.5}, {"train_s": 50, "accuracy": 0.4}]
    assert mod.speedup(flat, b)["speedup"] is None  # (a) never improved: no ratio


def test_efficiency_reference_is_refused_unless_measured_the_same_way(tmp_path: Path) -> None:
    mod = _bench_efficiency()
    expect = {"task": "single_turn", "seed": 1, "eval_samples": 1000, "eval_every": 10}
    ref = tmp_path / "efficiency.json"
    vanilla = {"curve": [{"train_s": 0, "accuracy": 0.5}]}
    ref.write_text(json.dumps({**expect, "variants": {"vanilla": vanilla}}))
    assert mod.reference_vanilla(str(ref), expect)["curve"][0]["accuracy"] == 0.5
    with pytest.raises(ValueError, match="eval_samples is 1000, this run has 300"):
        mod.reference_vanilla(str(ref), {**expect, "eval_samples": 300})
    with pytest.raises(ValueError, match="no readable vanilla run"):
        mod.reference_vanilla(str(tmp_path / "missing.json"), expect)


def test_grpo_settings_follow_the_config_and_the_multi_step_task_drops_the_format_term() -> None:
    from tooltune.quickstart.grpo import GRPOSettings
    from tooltune.quickstart.run import make_config

    c = make_config("mini", seed=3)
    s = GRPOSettings.from_config(c)
    assert (s.steps, s.lr, s.seed, s.eval_every) == (c.grpo_steps, c.grpo_lr, 3, c.grpo_eval_every)
    assert s.require_format
    bench = GRPOSettings.from_config(make_config("mini", multi_step=True), wall_budget_s=9.0, downsample_m=2)
    assert not bench.require_format and (bench.wall_budget_s, bench.downsample_m) == (9.0, 2)


def test_unknown_settings_are_named() -> None:
    from tooltune.quickstart.run import make_config

    with pytest.raises(ValueError, match="grpo_stepz"):
        make_config("mini", grpo_stepz=1)
    with pytest.raises(ValueError, match="budget"):
        make_config("huge")


def test_mini_pipeline_resumes_and_reports(tmp_path) -> None:
    from tooltune.quickstart.run import STAGES, Pipeline, make_config

    cfg = make_config("mini", threads=1)
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
    assert sum(v["n"] for v in per_cat.values()) == cfg.n_heldout
    assert report["grpo"]["steps"] == cfg.grpo_steps
    assert report["sft_continued"]["budget_s"] == report["grpo"]["train_wall_s"]
    assert (tmp_path / "report.md").read_text().startswith("# tooltune quickstart report")
    for png in report["plots"]:
        assert (tmp_path / png).stat().st_size > 0
    with pytest.raises(ValueError, match="other settings"):
        Pipeline(tmp_path, make_config("mini", threads=1, grpo_steps=5))
