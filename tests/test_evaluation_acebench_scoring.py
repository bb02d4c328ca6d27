"""ACEBench scoring rules on the real files: ground truth passes, wrong answers fail, agent skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooltune.cli import main
from tooltune.evaluation import acebench
from tooltune.prompts import render_answer
from tooltune.schema import ToolCall


@pytest.fixture(scope="module")
def samples(shared_data_dir: Path) -> dict[str, tuple[str, object]]:
    d = shared_data_dir / "acebench"
    return {s.id: (c, s) for c, s in acebench.load_samples(d, acebench.categories_in(d))}


def test_scripted_run_through_the_cli_scores_100(tmp_path, shared_data_dir) -> None:
    # under `corrected`: the official checker fails some of its own ground truth (see
    # test_evaluation_acebench_official.py), the corrected rules pass all of it
    out = tmp_path / "ace"
    assert main(["eval", "acebench", "--scripted", "--data-dir", str(shared_data_dir / "acebench"),
                 "--out", str(out), "--no-report", "--scoring", "corrected"]) == 0
    s = json.loads((out / "summary.json").read_text())
    groups = s["per_seed"]["0"]["groups"]
    assert groups == {"normal": 1.0, "special": 1.0, "agent": 1.0} and s["skipped"] == []
    assert s["scores"]["overall"] == pytest.approx(sum(acebench.WEIGHTS.values()))
    assert s["scores"]["agent_process_accuracy"] == 1.0
    # a multi-turn conversation is one unit: 50 conversations, not 123 turns
    assert s["per_seed"]["0"]["categories"]["normal_multi_turn_user_adjust"]["total"] == 50
    manifest = json.loads((out / "manifest.json").read_text())
    assert "data_special_incomplete.json" in manifest["data_sha256"]
    assert "user simulator: scripted-user" in manifest["backend"]


def test_agent_multi_turn_is_skipped_without_a_user_simulator(tmp_path, shared_data_dir, capsys) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text("")
    out = tmp_path / "ace"
    assert main(["eval", "acebench", "--predictions", str(preds), "--partial", "--categories",
                 "agent_multi_step,agent_multi_turn", "--data-dir", str(shared_data_dir / "acebench"),
                 "--out", str(out), "--no-report"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert any("user simulator" in x for x in s["skipped"])
    assert "skipped: agent_multi_turn" in capsys.readouterr().err


def test_string_values_pass_by_normalized_substring_and_types_matter(samples) -> None:
    def valid(sid: str, **changed: object) -> bool:
        cat, s = samples[sid]
        (gold,) = s.answer
        text = render_answer([ToolCall(gold.name, {**gold.arguments, **changed})], "tool_n1")
        return acebench.score(s, cat, text, "tool_n1", scoring="corrected").valid

    assert valid("normal_atom_list_2", location="San Francisco, CA (Bay Area)")
    assert not valid("normal_atom_list_2", location="Boston")
    assert valid("normal_atom_number_4", analysisDepth=5.0)
    assert not valid("normal_atom_bool_0", include_vegetarian_options=1)
    criteria = {"metrics": ["Time-Savings", "cost reduction"], "time_frame": "Last Quarter"}
    assert valid("normal_atom_object_deep_0", evaluation_criteria=criteria)
    assert not valid("normal_atom_list_2", vaccineTypes=["Moderna", "Pfizer"])


def test_wrong_answers_fail(samples) -> None:
    cat, s = samples["normal_atom_bool_0"]
    gold = s.answer[0]
    assert acebench.score(s, cat, render_answer(s.answer, "tool_n1"), "tool_n1").valid
    k = next(iter(gold.arguments))
    for calls in ([ToolCall(gold.name + "x", gold.arguments)], [gold, gold],
                  [ToolCall(gold.name, {a: b for a, b in gold.arguments.items() if a != k})]):
        assert not acebench.score(s, cat, render_answer(calls, "tool_n1"), "tool_n1").valid
    cat, s = samples["special_incomplete_0"]
    assert not acebench.score(s, cat, "Missing necessary parameters", "tool_n1").valid
    assert not acebench.score(s, cat, render_answer([gold], "tool_n1"), "tool_n1").valid
    cat, s = samples["special_irrelevant_0"]
    assert not acebench.score(s, cat, "Sure, here it is.", "tool_n1").valid


def test_a_conversation_fails_when_one_turn_fails() -> None:
    cat = "normal_multi_turn_user_adjust"
    recs = [{"id": f"{cat}_0_0", "category": cat, "valid": True},
            {"id": f"{cat}_0_1", "category": cat, "valid": False},
            {"id": f"{cat}_1_0", "category": cat, "valid": True}]
    cats = acebench.scores(recs)["categories"]
    assert cats[cat] == {"accuracy": 0.5, "correct": 1, "total": 2}


def test_r2if_aggregates_atom_single_turn_irrelevant_overall() -> None:
    spec = {"normal_atom_bool": (1, 2), "normal_atom_enum": (2, 2), "normal_atom_list": (0, 1),
            "normal_single_turn_single_function": (3, 4), "normal_single_turn_parallel_function": (1, 2),
            "special_irrelevant": (4, 5), "special_incomplete": (0, 3), "normal_similar_api": (0, 2)}
    recs = [{"id": f"{c}_{i}", "category": c, "valid": i < ok}
            for c, (ok, n) in spec.items() for i in range(n)]
    r2if = acebench.scores(recs)["r2if"]
    atom = (1 / 2 + 1 + 0) / 3
    single = (3 / 4 + 1 / 2) / 2
    assert r2if["atom"] == pytest.approx(atom) and r2if["single_turn"] == pytest.approx(single)
    assert r2if["irrelevant"] == pytest.approx(4 / 5)
    assert r2if["overall"] == pytest.approx((atom + single + 4 / 5) / 3)
    partial = acebench.scores([r for r in recs if not r["category"].startswith("special")])["r2if"]
    assert partial["irrelevant"] is None and partial["overall"] is None
    assert partial["atom"] == pytest.approx(atom)
