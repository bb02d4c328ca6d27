"""ACE over BFCL entries: a scripted student with known v and v_base gives the hand-computed ACE, the same
as `rewards.cer.average_cot_effectiveness`; seeds, resume, left-out categories, files."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")

from tooltune.config import ConfigError  # noqa: E402
from tooltune.evaluation.acebench import SYSTEM_SUFFIX  # noqa: E402
from tooltune.evaluation.controls import Controls  # noqa: E402
from tooltune.evaluation.r2if_ace import (  # noqa: E402
    ACE_FILE,
    AceItem,
    AceOptions,
    _completions,
    ace_set,
    evaluate_ace,
)
from tooltune.generation import ReplayBackend, Sampling, ScriptedBackend  # noqa: E402
from tooltune.prompts import render_answer  # noqa: E402
from tooltune.rewards.cer import CERReward, average_cot_effectiveness  # noqa: E402
from tooltune.schema import ToolCall  # noqa: E402

CATEGORIES = "simple_javascript,irrelevance,live_relevance,multi_turn_base"
R2IF = Controls(template="r2if")
WRONG = [ToolCall("no_such_function", {})]


@pytest.fixture(scope="module")
def found():
    return ace_set("bfcl", CATEGORIES, R2IF)


@pytest.fixture(scope="module")
def picked(found):
    js = [i for i in found.items if i.category == "simple_javascript"][:3]
    irr = [i for i in found.items if i.category == "irrelevance"][:2]
    return dict(zip("ABCDE", js + irr))


class Student:
    """Answers on its own correctly for `base_ok` entries; continues correctly from reasoning that says
    GOOD and wrongly from any other."""

    def __init__(self, items, base_ok):
        self.by_key = {i.key: i for i in items}
        self.base_ok, self.requests = {i.key for i in base_ok}, []
        self.backend = ScriptedBackend(self.play, name="student")

    def play(self, r):
        self.requests.append((r.meta["cer"], r.id))
        gold = self.by_key[r.id].gold
        if r.meta["cer"] == "base":
            return render_answer(gold if r.id in self.base_ok else WRONG, "r2if")
        calls = gold if "GOOD" in r.prefix else WRONG
        return render_answer(calls, "r2if").split("<tool>", 1)[1]  # the rest of the call block


def test_the_entries_are_single_turn_ones_with_a_call_list_answer(found):
    assert set(found.left_out) == {"live_relevance", "multi_turn_base"}
    assert found.categories == ["irrelevance", "simple_javascript"]
    assert len(found.items) == 50 + 240
    irr = [i for i in found.items if i.category == "irrelevance"]
    assert all(i.gold == [] for i in irr) and all(i.gold for i in found.items if i not in irr)
    system = found.items[0].messages[0]
    assert system["role"] == "system" and "#function_name#" in system["content"]  # rendered as evaluated


def test_ace_matches_hand_computation_and_the_library_function(tmp_path, found, picked):
    A, B, C, D, E = (picked[k] for k in "ABCDE")
    completions = {
        A.id: render_answer(A.gold, "r2if", reasoning="GOOD reasoning"),  # v 1, v_base 0: +1
        B.id: render_answer(B.gold, "r2if", reasoning="BAD reasoning"),  # v 0, v_base 1: -1
        C.id: "no reasoning block at all",  # unreadable reasoning: v 0, v_base 1: -1
        D.id: render_answer([], "r2if", reasoning="GOOD: nothing fits"),  # v 1, v_base 1: 0
        E.id: render_answer([], "r2if", reasoning="BAD"),  # v 0, v_base 0: 0
    }
    student = Student(found.items, base_ok=[B, C, D])
    opts = AceOptions(k=2)
    summary = evaluate_ace("bfcl", ReplayBackend(completions, name="policy"), student.backend, tmp_path,
                           R2IF, CATEGORIES, opts, partial=True, show_progress=False)
    records = {r["id"]: r for r in map(json.loads, (tmp_path / ACE_FILE).read_text().splitlines())}
    r_cer = {k: records[i.id]["r_cer"] for k, i in picked.items()}
    assert r_cer == {"A": 1, "B": -1, "C": -1, "D": 0, "E": 0}
    assert (records[B.id]["v"], records[B.id]["v_base"]) == (0, 1)
    seed0 = summary["per_seed"]["0"]
    assert seed0["ace"] == pytest.approx(-0.2) and seed0["n"] == 5
    assert seed0["categories"]["simple_javascript"]["ace"] == pytest.approx(-1 / 3)
    assert seed0["categories"]["irrelevance"]["ace"] == 0
    assert summary["scores"]["ace"] == pytest.approx(-0.2) and summary["left_out"].keys() == {
        "live_relevance", "multi_turn_base"}
    # the same statistic as the reward library's ACE on the same inputs
    items = list(picked.values())
    lib = average_cot_effectiveness(CERReward(Student(found.items, [B, C, D]).backend, k=2),
                                    [completions[i.id] for i in items], [i.gold for i in items],
                                    [i.messages for i in items], [i.key for i in items])
    assert lib["ace"] == pytest.approx(seed0["ace"]) and lib["stderr"] == pytest.approx(seed0["stderr"])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["benchmark"] == "bfcl:ace" and manifest["sampling"]["student"] == "student"
    assert manifest["sampling"]["ace"]["k"] == 2 and manifest["template"] == "r2if"
    replayed = [json.loads(x) for x in (tmp_path / "completions_seed0.jsonl").read_text().splitlines()]
    assert {r["id"]: r["result"] for r in replayed} == completions
    assert (tmp_path / "v_base.sqlite").exists()


def test_seeds_and_resume_ask_the_student_nothing_twice(tmp_path, found, picked):
    A, B = picked["A"], picked["B"]
    seed0 = ReplayBackend({A.id: render_answer(A.gold, "r2if", reasoning="GOOD"),
                           B.id: render_answer(B.gold, "r2if", reasoning="BAD")})
    seed1 = ReplayBackend({A.id: render_answer(A.gold, "r2if", reasoning="GOOD"),
                           B.id: render_answer(B.gold, "r2if", reasoning="GOOD")})
    first = Student(found.items, base_ok=[B])
    evaluate_ace("bfcl", [(0, seed0)], first.backend, tmp_path, R2IF, "simple_javascript", AceOptions(k=2),
                 partial=True, show_progress=False)
    assert sorted(kind for kind, _ in first.requests) == ["base", "base", "continuation", "continuation"]
    again = Student(found.items, base_ok=[B])
    summary = evaluate_ace("bfcl", [(0, seed0), (1, seed1)], again.backend, tmp_path, R2IF,
                           "simple_javascript", AceOptions(k=2), partial=True, resume=True,
                           show_progress=False)
    # seed 0 is done and both baselines are cached: only seed 1's reasoning is continued
    assert [kind for kind, _ in again.requests] == ["continuation", "continuation"]
    assert summary["per_seed"]["0"]["ace"] == pytest.approx(0.0)  # (1 - 0) + (0 - 1)
    assert summary["per_seed"]["1"]["ace"] == pytest.approx(0.5)  # (1 - 0) + (1 - 1)
    assert summary["mean_std"]["ace"]["mean"] == pytest.approx(0.25) and summary["mean_std"]["ace"]["n"] == 2


def test_missing_predictions_and_templates_without_reasoning(tmp_path):
    item = AceItem("x1", "simple", [{"role": "user", "content": "q"}], [])
    other = AceItem("x2", "simple", [{"role": "user", "content": "q"}], [])
    replay = ReplayBackend({"x1": "text"})
    assert _completions([item, other], replay, 0, Sampling(), partial=False) == [(other, ""), (item, "text")]
    assert _completions([item, other], replay, 0, Sampling(), partial=True) == [(item, "text")]
    with pytest.raises(ConfigError, match="reasoning block"):
        evaluate_ace("bfcl", replay, replay, tmp_path, Controls(template="bfcl"), "irrelevance")


def test_acebench_entries_leave_out_sentence_answers_and_agents(shared_data_dir):
    found = ace_set("acebench", None, R2IF, shared_data_dir / "acebench")
    assert set(found.left_out) == {"special_incomplete", "special_error_param", "agent_multi_step",
                                   "agent_multi_turn"}
    by_cat = {}
    for i in found.items:
        by_cat.setdefault(i.category, []).append(i)
    assert all(i.gold == [] for i in by_cat["special_irrelevant"])
    assert all(i.gold for c, items in by_cat.items() if c.startswith("normal") for i in items)
    assert found.items[0].messages[0]["content"].endswith(SYSTEM_SUFFIX)  # rendered as evaluated


def test_eval_ace_command_runs_end_to_end_and_refuses_another_run(tmp_path, found, picked, tiny_model_dir,
                                                                  capsys):
    from tooltune.cli import main

    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(
        json.dumps({"id": i.id, "result": render_answer(i.gold, "r2if", reasoning="Step1: GOOD")}) + "\n"
        for i in list(picked.values())[:2]))
    out = tmp_path / "ace"
    argv = ["eval", "ace", "--benchmark", "bfcl", "--predictions", str(preds), "--template", "r2if",
            "--categories", CATEGORIES, "--partial", "--student-model", str(tiny_model_dir),
            "--k", "2", "--student-max-new-tokens", "8", "--out", str(out)]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_entries"] >= 2 and printed["ace"] == summary["scores"]["ace"]
    assert -1.0 <= printed["ace"] <= 1.0
    assert len((out / ACE_FILE).read_text().splitlines()) == 2
    assert main([*argv[:-2], "--template", "tool_n1", "--out", str(out), "--resume"]) == 2
    assert "template" in capsys.readouterr().err


def test_eval_ace_with_predictions_measures_only_the_predicted_entries(tmp_path, found, picked,
                                                                      tiny_model_dir) -> None:
    from tooltune.cli import main

    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(
        json.dumps({"id": i.id, "result": render_answer(i.gold, "r2if", reasoning="Step1: GOOD")}) + "\n"
        for i in list(picked.values())[:2]))
    out = tmp_path / "ace"
    assert main(["eval", "ace", "--benchmark", "bfcl", "--predictions", str(preds), "--template", "r2if",
                 "--categories", CATEGORIES, "--student-model", str(tiny_model_dir), "--k", "1",
                 "--student-max-new-tokens", "4", "--out", str(out)]) == 0
    assert len((out / ACE_FILE).read_text().splitlines()) == 2  # no student run on the other entries
    summary = json.loads((out / "summary.json").read_text())
    assert summary["no_prediction"] == {"0": len(found.items) - 2}
    assert summary["per_seed"]["0"]["n"] == 2
