"""BFCL single-turn and relevance entries through the official checker: ground-truth replay via the CLI,
wrong outputs, decoding failures, name styles, hostile completions, the summary formulas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")
pytestmark = pytest.mark.usefixtures("bfcl_project_root")

from tooltune.cli import main  # noqa: E402
from tooltune.evaluation import bfcl  # noqa: E402
from tooltune.evaluation.scripted import bfcl_answers  # noqa: E402
from tooltune.prompts import python_calls, render_answer  # noqa: E402
from tooltune.schema import ToolCall  # noqa: E402


@pytest.fixture(scope="module")
def single_entries() -> dict[str, bfcl.BfclEntry]:
    return {e.id: e for e in bfcl.load_entries(bfcl.expand_categories("single_turn"))}


def _verdicts(out: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (out / "verdicts.jsonl").read_text().splitlines())}


def test_ground_truth_replay_through_cli_passes_every_passable_single_turn_entry(tmp_path: Path) -> None:
    answers, _ = bfcl_answers("single_turn", "tool_n1")
    preds = tmp_path / "gt.jsonl"
    preds.write_text("".join(json.dumps({"id": k, "result": v}) + "\n" for k, v in answers.items()))
    out = tmp_path / "run"
    rc = main(["eval", "bfcl", "--predictions", str(preds), "--template", "tool_n1", "--categories",
               "single_turn", "--out", str(out), "--no-report"])
    assert rc == 0
    verdicts = _verdicts(out)
    assert len(verdicts) == len(answers)
    failed = sorted(k for k, r in verdicts.items() if not r["valid"])
    assert failed == sorted(bfcl.IMPOSSIBLE_ENTRIES)
    summary = json.loads((out / "summary.json").read_text())
    for cat in ("irrelevance", "live_irrelevance", "live_relevance"):
        assert summary["scores"][f"categories.{cat}.accuracy"] == 1.0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["template"] == "tool_n1" and "BFCL_v4_simple_python.json" in manifest["data_sha256"]


def _mutations(e: bfcl.BfclEntry) -> dict[str, list[ToolCall]]:
    gold = bfcl.ground_truth_calls(e)
    first = gold[0]
    out: dict[str, list[ToolCall]] = {"extra_call": [*gold, first], "wrong_function":
                                      [ToolCall(first.name + "_x", first.arguments), *gold[1:]]}
    if first.arguments:
        k, v = next(iter(first.arguments.items()))
        wrong = "zzz" if isinstance(v, str) else ([] if isinstance(v, list) else 987654321)
        out["wrong_value"] = [ToolCall(first.name, {**first.arguments, k: wrong}), *gold[1:]]
        out["missing_arg"] = [ToolCall(first.name, {a: b for a, b in first.arguments.items() if a != k}),
                              *gold[1:]]
    return out


def test_verdicts_equal_official_decoder_and_checker_on_wrong_outputs(single_entries) -> None:
    """Ours: tool_n1 text -> parse -> checker. Official: BFCL's own prompting decoder on python text."""
    from bfcl_eval.constants.enums import ReturnFormat
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting

    scorer = bfcl.SingleTurnScorer("tool_n1")
    cats = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
            "live_parallel")
    picked = [e for e in single_entries.values()
              if e.category in cats and int(e.id.split("_")[-1].split("-")[0]) % 7 == 0]
    compared = {"wrong_value": 0, "missing_arg": 0, "extra_call": 0, "wrong_function": 0}
    for e in picked:
        if e.id in bfcl.IMPOSSIBLE_ENTRIES:
            continue
        for kind, calls in _mutations(e).items():
            ours = scorer.score(e, render_answer(calls, "tool_n1"))
            decoded = default_decode_ast_prompting(python_calls(calls), ReturnFormat.PYTHON)
            official = ast_checker(e.functions, decoded, e.ground_truth, scorer.language(e.category),
                                   e.category, scorer.model_key)
            assert ours.valid == official["valid"], (e.id, kind, ours.error)
            compared[kind] += 1
    assert min(compared.values()) > 20
    assert not any(scorer.score(e, render_answer(_mutations(e)["extra_call"], "tool_n1")).valid
                   for e in picked if "parallel" not in e.category)


def test_decoding_failure_is_a_failed_entry_with_reason_except_for_irrelevance(single_entries) -> None:
    scorer = bfcl.SingleTurnScorer("tool_n1")
    v = scorer.score(single_entries["simple_python_0"], "<think>x</think> no call block")
    assert not v.valid and v.error.startswith("decode_failed")
    assert scorer.score(single_entries["irrelevance_0"], "I cannot help with that.").valid
    assert not scorer.score(single_entries["live_relevance_0-0-0"], "sorry").valid


def test_dotted_names_follow_the_name_style(single_entries) -> None:
    e = single_entries["simple_python_1"]  # math.factorial
    under = bfcl.SingleTurnScorer("tool_n1", name_style="underscore")
    dotted = bfcl.SingleTurnScorer("tool_n1", name_style="dotted")
    text_under = render_answer(bfcl.ground_truth_calls(e, "underscore"), "tool_n1")
    text_dot = render_answer(bfcl.ground_truth_calls(e, "dotted"), "tool_n1")
    assert "math_factorial" in text_under and "math.factorial" in text_dot
    assert under.score(e, text_under).valid and not under.score(e, text_dot).valid
    assert dotted.score(e, text_dot).valid and not dotted.score(e, text_under).valid


def test_summary_formulas() -> None:
    recs = []
    spec = {"simple_python": (3, 4), "simple_java": (1, 2), "simple_javascript": (2, 2), "multiple": (1, 1),
            "parallel": (0, 1), "parallel_multiple": (1, 2), "live_simple": (1, 3), "live_multiple": (6, 7),
            "live_parallel": (0, 1), "live_parallel_multiple": (1, 1), "irrelevance": (1, 2),
            "live_irrelevance": (3, 3), "multi_turn_base": (1, 2), "multi_turn_miss_func": (0, 1),
            "multi_turn_miss_param": (1, 1), "multi_turn_long_context": (1, 4)}
    for cat, (ok, n) in spec.items():
        recs += [{"id": f"{cat}_{i}", "category": cat, "valid": i < ok} for i in range(n)]
    s = bfcl.scores(recs)
    acc = {c: ok / n for c, (ok, n) in spec.items()}
    simple = (acc["simple_python"] + acc["simple_java"] + acc["simple_javascript"]) / 3
    non_live = (simple + acc["multiple"] + acc["parallel"] + acc["parallel_multiple"]) / 4
    live = sum(spec[c][0] for c in bfcl.LIVE_AST) / sum(spec[c][1] for c in bfcl.LIVE_AST)
    halluc = (acc["irrelevance"] + acc["live_irrelevance"]) / 2
    multi = sum(acc[c] for c in bfcl.MULTI_TURN) / 4
    lb = s["leaderboard"]
    assert lb["non_live"] == pytest.approx(non_live) and lb["live"] == pytest.approx(live)
    assert lb["hallucination"] == pytest.approx(halluc) and lb["multi_turn"] == pytest.approx(multi)
    assert lb["overall"] is None and lb["agentic"] is None and lb["web_search"] is None  # needs web search
    assert lb["memory"] is None and lb["overall_ceiling"] == 0.6
    assert lb["overall_partial"] == pytest.approx(0.1 * non_live + 0.1 * live + 0.1 * halluc + 0.3 * multi)
    memory = [{"id": f"{c}_{i}", "category": c, "valid": i < k} for c, k in zip(bfcl.MEMORY, (1, 2, 3))
              for i in range(4)]
    lb = bfcl.scores(recs + memory)["leaderboard"]
    assert lb["memory"] == pytest.approx(0.5) and lb["overall_ceiling"] == 0.8
    assert lb["overall_partial"] == pytest.approx(
        0.1 * non_live + 0.1 * live + 0.1 * halluc + 0.3 * multi + 0.4 * 0.5 / 2)
    assert bfcl.scores(memory)["leaderboard"]["overall_partial"] is None
    assert s["table2"]["overall"] == pytest.approx((non_live + live) / 2)
    assert bfcl.scores(recs[:3])["leaderboard"]["non_live"] is None
    # R2IF's columns: non-live, live, irrelevance (irrelevance + live_irrelevance) and their mean
    r2if = s["r2if"]
    assert r2if["non_live"] == pytest.approx(non_live) and r2if["live"] == pytest.approx(live)
    assert r2if["irrelevance"] == pytest.approx(halluc)
    assert r2if["overall"] == pytest.approx((non_live + live + halluc) / 3)
    assert {"r2if.overall", "r2if.irrelevance"} <= set(bfcl.FORMULAS)
    no_live = bfcl.scores([r for r in recs if not r["category"].startswith("live")])["r2if"]
    assert no_live["live"] is None and no_live["irrelevance"] is None and no_live["overall"] is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_any_completion_is_scored_without_raising(single_entries, text: str) -> None:
    for key in ("simple_python_0", "parallel_0", "irrelevance_0", "simple_java_0"):
        v = bfcl.SingleTurnScorer("python").score(single_entries[key], text)
        assert isinstance(v.valid, bool)


@pytest.mark.parametrize("with_memory", [True, False])
def test_partial_overall_equals_bfcl_evals_leaderboard_table(tmp_path, with_memory: bool) -> None:
    """bfcl-eval's own leaderboard table (`generate_leaderboard_csv`) from the same category scores, web
    search absent (counted 0 there): its overall is our `overall_partial`."""
    import random

    import pandas as pd
    from bfcl_eval.eval_checker.eval_runner_helper import generate_leaderboard_csv

    rng = random.Random(int(with_memory))
    cats = [c for c in bfcl.ALL_CATEGORIES if with_memory or c not in bfcl.MEMORY]
    sizes = {c: rng.randint(3, 12) for c in cats}
    right = {c: rng.randint(0, n) for c, n in sizes.items()}
    recs = [{"id": f"{c}_{i}", "category": c, "valid": i < right[c]} for c in cats for i in range(sizes[c])]
    table = {"Qwen_Qwen3-8B-FC": {c: {"accuracy": right[c] / sizes[c], "total_count": sizes[c]}
                                  for c in cats}}
    generate_leaderboard_csv(table, tmp_path)
    theirs = pd.read_csv(tmp_path / "data_overall.csv").iloc[0]["Overall Acc"]
    ours = bfcl.scores(recs)["leaderboard"]["overall_partial"]
    assert f"{100 * ours:.2f}%" == theirs

