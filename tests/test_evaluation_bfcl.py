"""BFCL through the official checker: ground-truth replay via the CLI, wrong outputs, multi-turn, safety."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")

from tooltune.cli import main  # noqa: E402
from tooltune.evaluation import bfcl  # noqa: E402
from tooltune.evaluation.bfcl_multiturn import (  # noqa: E402
    MultiTurnConfig,
    MultiTurnRun,
    fresh_model_name,
    run_multi_turn,
    safe_call_string,
    scripted_policy,
)
from tooltune.evaluation.scripted import bfcl_answers  # noqa: E402
from tooltune.generation import ReplayBackend, ScriptedBackend  # noqa: E402
from tooltune.prompts import python_calls, render_answer  # noqa: E402
from tooltune.schema import ToolCall  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _bfcl_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(tmp_path_factory.mktemp("bfcl_root")))


@pytest.fixture(scope="module")
def single_entries() -> dict[str, bfcl.BfclEntry]:
    return {e.id: e for e in bfcl.load_entries(bfcl.expand_categories("single_turn"))}


@pytest.fixture(scope="module")
def multi_entries() -> list[bfcl.BfclEntry]:
    return bfcl.load_entries(bfcl.MULTI_TURN)


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


def test_scripted_multi_turn_scores_100_percent(multi_entries) -> None:
    """All 200 entries of every multi-turn category would take ~20 s here; a deterministic quarter
    (ids divisible by 4) runs in the tests, the full 800 in bench/eval_bfcl.py --multi-turn."""
    subset = [e for e in multi_entries if int(e.id.rsplit("_", 1)[1]) % 4 == 0]
    got = []
    run_multi_turn(subset, ScriptedBackend(scripted_policy(subset)), MultiTurnConfig(),
                   lambda v, raw: got.append(v), parallel=8)
    assert len(got) == len(subset) == 200
    assert [v.id for v in got if not v.valid] == []
    scores = bfcl.scores([v.to_dict() for v in got])
    assert scores["leaderboard"]["multi_turn"] == 1.0


def test_multi_turn_wrong_play_fails_like_the_official_checker(multi_entries) -> None:
    e = next(x for x in multi_entries if x.id == "multi_turn_base_0")
    good = scripted_policy([e])

    def lazy(r):  # skips the last call of the first turn
        text = good(r)
        if r.meta["turn"] == 0 and r.meta["step"] == 0:
            from tooltune.parsing import parse_completion

            return render_answer(parse_completion(text).calls[:-1], "tool_n1")
        return text

    got = []
    run_multi_turn([e], ScriptedBackend(lazy), MultiTurnConfig(), lambda v, raw: got.append((v, raw)))
    (v, raw), = got
    assert not v.valid and v.error.startswith("multi_turn:")
    assert len(raw) == len(e.entry["question"])


def test_force_termination_after_the_step_limit(multi_entries) -> None:
    e = multi_entries[0]
    loop = ScriptedBackend(lambda r: render_answer([ToolCall("pwd", {})], "tool_n1"))
    got = []
    run_multi_turn([e], loop, MultiTurnConfig(), lambda v, raw: got.append((v, raw)))
    (v, raw), = got
    assert not v.valid and "force_terminated" in v.error and len(raw[0]) == 21


def test_replayed_multi_turn_predictions_drive_the_loop(multi_entries, tmp_path: Path) -> None:
    e = multi_entries[1]
    play = scripted_policy([e])
    from tooltune.generation import GenerationRequest

    result = [[play(GenerationRequest([], id=e.id, meta={"turn": t, "step": 0}))]
              for t in range(len(e.entry["question"]))]
    got = []
    run_multi_turn([e], ReplayBackend({e.id: result}), MultiTurnConfig(), lambda v, raw: got.append(v))
    assert got[0].valid


def test_unsafe_calls_never_reach_the_executor(multi_entries, tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    allowed = {"ls", "cd"}
    assert safe_call_string(ToolCall("ls", {"a": True}), allowed) == ("ls(a=True)", None)
    for call in (ToolCall("open", {"file": str(target), "mode": "w"}),
                 ToolCall("__import__", {"name": "os"})):
        assert safe_call_string(call, allowed) == (None, f"function {call.name!r} does not exist")
    # Even a name on the list must be a bare identifier, with identifier keywords and literal values.
    for call in (ToolCall("os.system", {"command": "touch x"}), ToolCall("ls", {"a b": 1}),
                 ToolCall("ls", {"a": float("inf")}), ToolCall("ls", {"import": 2}), ToolCall("ls()#", {})):
        text, why = safe_call_string(call, allowed | {call.name})
        assert text is None and why, call
    e = multi_entries[0]
    run = MultiTurnRun(e, MultiTurnConfig(), fresh_model_name())
    run.feed(render_answer([ToolCall("open", {"file": str(target), "mode": "w"})], "tool_n1"))
    assert not target.exists()
    assert run.history[-1]["role"] == "tool" and "call rejected" in run.history[-1]["content"]
    assert run.decoded[0] == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_any_completion_is_handled_without_raising(multi_entries, single_entries, text: str) -> None:
    run = MultiTurnRun(multi_entries[0], MultiTurnConfig(template="python"), fresh_model_name())
    run.feed(text)
    for key in ("simple_python_0", "parallel_0", "irrelevance_0", "simple_java_0"):
        v = bfcl.SingleTurnScorer("python").score(single_entries[key], text)
        assert isinstance(v.valid, bool)


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
    assert lb["overall"] == pytest.approx(0.1 * non_live + 0.1 * live + 0.1 * halluc + 0.3 * multi)
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


def test_native_multi_turn_requests_carry_the_turns_tools(multi_entries) -> None:
    from tooltune.evaluation.bfcl import entry_tools
    from tooltune.prompts import chat_tools, resolve_native

    native = resolve_native(None, "native")  # as an endpoint applies the chat template
    run = MultiTurnRun(multi_entries[0], MultiTurnConfig(template=native), fresh_model_name())
    request = run.request()
    assert request.tools == chat_tools(entry_tools(run.functions)) and request.tools
    assert MultiTurnRun(multi_entries[0], MultiTurnConfig(), fresh_model_name()).request().tools is None
