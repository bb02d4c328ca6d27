"""BFCL multi-turn results scored as bfcl-eval scores them (official) and by our rules (corrected).

Runs on the installed bfcl-eval package: its 800 multi-turn entries and ground truths, its checker and,
as the reference for `official`, its own evaluation of one entry (`_evaluate_single_multi_turn_entry`
with the open-model handlers' decoder, `default_decode_execute_prompting`). The reference is only ever
given results written in this file.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")
pytestmark = pytest.mark.usefixtures("bfcl_project_root")

from tooltune.evaluation import bfcl  # noqa: E402
from tooltune.evaluation.bfcl.official import (  # noqa: E402
    CORRECTED_RULES,
    REFUSED_CALL,
    class_methods,
    decode_result,
    fresh_model_name,
    literal_call,
    score_multi_turn,
    score_multi_turn_predictions,
    step_calls,
)
from tooltune.evaluation.bfcl.truth import parse_call_string  # noqa: E402
from tooltune.prompts import python_literal, render_answer  # noqa: E402
from tooltune.schema import ToolCall  # noqa: E402


@pytest.fixture(scope="module")
def entries() -> dict[str, bfcl.BfclEntry]:
    return {e.id: e for e in bfcl.load_entries(bfcl.MULTI_TURN)}


def _docs(e: bfcl.BfclEntry) -> list[dict[str, Any]]:
    held_out = (e.entry.get("missed_function") or {}).values()
    return list(e.entry["function"]) + [d for docs in held_out for d in docs]


def truth_calls(e: bfcl.BfclEntry) -> list[list[ToolCall]]:
    return [[parse_call_string(s, _docs(e)) for s in turn] for turn in e.ground_truth]


def truth_result(e: bfcl.BfclEntry, template: str = "bfcl") -> list[list[str]]:
    """What a perfect model records: per turn one step with the turn's calls (if any), then a no-call step."""
    return [([render_answer(calls, template)] if calls else []) + [render_answer([], template)]
            for calls in truth_calls(e)]


class OpenModelHandler:
    """The decoding part of bfcl-eval's open-model handlers (`OSSHandler.decode_execute`)."""

    def decode_execute(self, result: Any, has_tool_call_tag: bool = False) -> list[str]:
        from bfcl_eval.model_handler.utils import default_decode_execute_prompting

        return default_decode_execute_prompting(result, has_tool_call_tag)


def bfcl_eval_verdict(e: bfcl.BfclEntry, result: Any) -> dict[str, Any]:
    """bfcl-eval's own evaluation of `result` (as its runner does for one entry of a result file)."""
    from bfcl_eval.eval_checker.eval_runner import _evaluate_single_multi_turn_entry
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    name = fresh_model_name()
    try:
        out = _evaluate_single_multi_turn_entry(OpenModelHandler(), e.id, copy.deepcopy(result),
                                                e.ground_truth, copy.deepcopy(e.entry), name, e.category)
    finally:
        for key in [k for k in vars(multi_turn_utils) if k.startswith(name)]:
            delattr(multi_turn_utils, key)
    error = out.get("error") or {}
    return {"valid": bool(out["valid"]), "error_type": error.get("error_type")}


@pytest.mark.parametrize("template", ["bfcl", "tool_n1"])
@pytest.mark.parametrize("scoring", ["official", "corrected"])
def test_ground_truth_replay_passes_every_multi_turn_entry(entries, template, scoring):
    results = {i: truth_result(e, template) for i, e in entries.items()}
    verdicts = score_multi_turn_predictions(entries.values(), results, template, scoring=scoring)
    assert len(verdicts) == len(entries) == 800
    assert [v.id for v in verdicts if not v.valid] == []


def _python_call(c: ToolCall, positional: bool = False) -> str:
    args = [python_literal(v) if positional and i == 0 else f"{k}={python_literal(v)}"
            for i, (k, v) in enumerate(c.arguments.items())]
    return f"{c.name}({', '.join(args)})"


def _perturbations(e: bfcl.BfclEntry) -> dict[str, Any]:
    truth = truth_result(e)
    calls = truth_calls(e)
    with_turn = [list(t) for t in truth]

    def each_turn(fn):
        return [fn(c, t) if c else t for c, t in zip(calls, truth)]

    def positional(c, t):  # each turn's first call with its first argument written positionally
        return ["[" + ", ".join(_python_call(x, positional=i == 0) for i, x in enumerate(c)) + "]", "[]"]

    return {
        "truth": truth,
        "extra_turn": [*with_turn, ["[]"]],
        "missing_turn": with_turn[:-1],
        "prose_first": each_turn(lambda c, t: ["I will call the tools now.", *t]),
        "empty_first": each_turn(lambda c, t: ["[]", *t]),
        "one_call_per_step": each_turn(lambda c, t: [render_answer([x], "bfcl") for x in c] + ["[]"]),
        "positional": each_turn(positional),
        "json_words": [[s.replace("True", "true").replace("False", "false") for s in t] for t in truth],
        "unknown_function": each_turn(lambda c, t: [t[0][:-1] + ", no_such_function(x=1)]", *t[1:]]),
        "dict_of_dicts": each_turn(lambda c, t: [t[0][:-1] + ", ls(a={'k': {'z': 1}})]", *t[1:]]),
        "long_turn": [*with_turn[:-1], [*with_turn[-1][:-1], *[with_turn[-1][0]] * 21, "[]"]],
        "first_turn_only": [truth[0], *[["[]"] for _ in truth[1:]]],
        "not_a_list": "[]",
    }


def test_official_verdicts_equal_bfcl_evals_own_on_perturbed_results(entries):
    picked = [e for cat in bfcl.MULTI_TURN for e in [x for x in entries.values() if x.category == cat][:6]]
    outcomes: dict[str, set[bool]] = {}
    differ = 0
    for e in picked:
        for kind, result in _perturbations(e).items():
            ours = score_multi_turn(e, result, "bfcl", scoring="official")
            ref = bfcl_eval_verdict(e, result)
            assert ours.valid == ref["valid"], (e.id, kind, ours.error, ref)
            if not ref["valid"]:
                assert ours.error.startswith(f"{ref['error_type']}: "), (e.id, kind, ours.error, ref)
            outcomes.setdefault(kind, set()).add(ours.valid)
            differ += score_multi_turn(e, result, "bfcl", scoring="corrected").valid != ours.valid
    always = {"truth": {True}, "prose_first": {True}, "empty_first": {True}, "one_call_per_step": {True},
              "unknown_function": {True}, "dict_of_dicts": {True}, "extra_turn": {False},
              "missing_turn": {False}, "not_a_list": {False}}
    assert {k: outcomes[k] for k in always} == always
    assert differ > 0


# --- the classes on which corrected differs from official -----------------------------------------------


def test_extra_turn_fails_official_as_force_terminated_and_is_ignored_corrected(entries):
    e = entries["multi_turn_base_0"]
    result = [*truth_result(e), ["[cd(folder='temp')]", "[]"]]
    official = score_multi_turn(e, result, "bfcl", scoring="official")
    assert not official.valid and official.error.startswith("multi_turn:force_terminated: ")
    assert bfcl_eval_verdict(e, result) == {"valid": False, "error_type": "multi_turn:force_terminated"}
    assert score_multi_turn(e, result, "bfcl", scoring="corrected").valid
    assert "turn_count" in CORRECTED_RULES


def test_a_turn_past_the_step_limit_passes_official_and_fails_corrected(entries):
    e = entries["multi_turn_base_0"]
    result = truth_result(e)
    result[-1] = [result[-1][0], *["[pwd()]"] * 20, "[]"]  # 21 steps with calls in the last turn
    assert score_multi_turn(e, result, "bfcl", scoring="official").valid
    assert bfcl_eval_verdict(e, result)["valid"]
    corrected = score_multi_turn(e, result, "bfcl", scoring="corrected")
    assert not corrected.valid
    assert corrected.error == "multi_turn:force_terminated: more than 20 steps in turn 3"
    result[-1] = result[-1][:20] + ["[]"]  # 20 steps: within the limit
    assert score_multi_turn(e, result, "bfcl", scoring="corrected").valid
    assert "step_limit" in CORRECTED_RULES


@pytest.mark.parametrize("template, first", [
    ("bfcl", "Let me look at the folder first."),
    ("bfcl", "[]"),
    ("tool_n1", "<think>no block</think>"),
    ("tool_n1", "<think>nothing yet</think>\n<tool_call>\n[]\n</tool_call>"),
])
def test_a_step_without_calls_is_skipped_official_and_ends_the_turn_corrected(entries, template, first):
    e = entries["multi_turn_base_0"]
    result = truth_result(e, template)
    result[1] = [first, *result[1]]
    official = decode_result(e, result, template, scoring="official")
    assert official.turns[1] == decode_result(e, truth_result(e, template), template).turns[1]
    assert any(n.startswith("turn 1 step 0: skipped") for n in official.notes)
    assert score_multi_turn(e, result, template, scoring="official").valid
    if template == "bfcl":
        assert bfcl_eval_verdict(e, result)["valid"]
    corrected = score_multi_turn(e, result, template, scoring="corrected")
    assert not corrected.valid and corrected.error.startswith("multi_turn:empty_turn_model_response: ")
    assert decode_result(e, result, template, scoring="corrected").turns[1] == []
    assert "no_call_ends_turn" in CORRECTED_RULES


def test_a_positional_argument_is_dropped_official_and_refused_corrected(entries):
    e = entries["multi_turn_base_0"]
    allowed = class_methods(e.entry)
    assert step_calls("[cd('document')]", "bfcl", "strict", allowed, "official") == (["cd()"], None)
    calls, why = step_calls("[cd('document')]", "bfcl", "strict", allowed, "corrected")
    assert calls is None and "positional" in why
    result = truth_result(e)
    result[0] = [result[0][0][:-1] + ", pwd('/')]", "[]"]  # a harmless extra call written with a positional
    assert score_multi_turn(e, result, "bfcl", scoring="official").valid
    assert bfcl_eval_verdict(e, result)["valid"]
    corrected = score_multi_turn(e, result, "bfcl", scoring="corrected")
    assert not corrected.valid and corrected.error.startswith("multi_turn:empty_turn_model_response: ")
    result[0] = ["[cd('document')]", *result[0]]  # the dropped argument: cd() fails, the turn goes on
    official = score_multi_turn(e, result, "bfcl", scoring="official")
    assert official.valid == bfcl_eval_verdict(e, result)["valid"]
    assert "python_decoding" in CORRECTED_RULES


def test_refused_calls_stay_a_failing_call_official_and_are_left_out_corrected(entries):
    e = entries["multi_turn_base_0"]
    text = "[cd(folder='document'), open(file='x', mode='w'), mkdir(dir_name={'k': {}})]"
    assert step_calls(text, "bfcl", "strict", class_methods(e.entry), "official") == (
        ["cd(folder='document')", REFUSED_CALL, REFUSED_CALL], None)
    # corrected: `open` is left out; the dict is a dict (BFCL writes it as a call of `k`)
    assert step_calls(text, "bfcl", "strict", class_methods(e.entry), "corrected") == (
        ["cd(folder='document')", "mkdir(dir_name={'k': {}})"], None)
    calls = [ToolCall("cd", {"folder": "document"}), ToolCall("open", {"file": "x"})]
    text = render_answer(calls, "tool_n1")
    assert step_calls(text, "tool_n1", "strict", class_methods(e.entry), "official") == (
        ["cd(folder='document')", REFUSED_CALL], None)
    assert step_calls(text, "tool_n1", "strict", class_methods(e.entry), "corrected") == (
        ["cd(folder='document')"], None)
    assert "refused_calls" in CORRECTED_RULES


# --- inputs, safety ----------------------------------------------------------------------------------


def test_results_that_are_not_lists_fail_as_inference_errors(entries):
    e = entries["multi_turn_base_1"]
    for scoring in ("official", "corrected"):
        for result in ("[ls(a=True)]", None, {"0": []}):
            v = score_multi_turn(e, result, "bfcl", scoring=scoring)
            assert not v.valid and v.error.startswith("multi_turn:inference_error: ")
    deep: list = ["[ls(a=True)]"]
    for _ in range(5000):
        deep = [deep]
    odd = [["[ls(a=True)]", None, 5, ["x"], deep], "[]", {"k": 1}, []]
    for scoring in ("official", "corrected"):
        assert not score_multi_turn(e, odd, "bfcl", scoring=scoring).valid
    boxed = truth_result(e)
    boxed[0] = [[boxed[0][0]], "[]"]  # a step stored as a one-element list
    assert score_multi_turn(e, boxed, "bfcl", scoring="corrected").valid  # the replay backend unboxes it
    assert not score_multi_turn(e, boxed, "bfcl", scoring="official").valid  # BFCL cannot decode a list
    assert not bfcl_eval_verdict(e, boxed)["valid"]
    assert "step_layout" in CORRECTED_RULES
    with pytest.raises(ValueError, match="scoring"):
        score_multi_turn(e, [], "bfcl", scoring="lenient")


def test_predictions_must_cover_every_entry_unless_partial(entries):
    some = [entries["multi_turn_base_0"], entries["multi_turn_base_1"]]
    preds = {"multi_turn_base_0": truth_result(some[0])}
    with pytest.raises(ValueError, match="1 entries have no result"):
        score_multi_turn_predictions(some, preds, "bfcl")
    verdicts = score_multi_turn_predictions(some, preds, "bfcl", partial=True)
    assert [(v.id, v.valid) for v in verdicts] == [("multi_turn_base_0", True)]


HOSTILE = [
    "[__import__(name='os')]",
    "[open(file='{marker}', mode='w')]",
    "[cd(folder=__import__('os').system('touch {marker}'))]",
    "[cd(folder=open(file='{marker}', mode='w'))]",
    "[ls.__globals__(a=1)]",
    "[cd(folder=(lambda: 1)())]",
    "[cd(folder=1 + __import__('os').getpid())]",
    "[exec(source='open(\"{marker}\", \"w\")')]",
    "[cd(folder={{'open': {{'file': '{marker}', 'mode': 'w'}}}})]",
    "[mkdir(dir_name='x' * 10**9)]",
    "[mkdir(dir_name=[[0] * 1000] * 1000)]",
    "[mkdir(dir_name=9 ** 9 ** 9)]",
    "[mkdir(dir_name='%999999999d' % 1)]",
    "[cd(folder='a'), kill(pid=1), exit(code=0)]",
    "[" + "[" * 5000 + "]" * 5000 + "]",
    "[mkdir(dir_name=" + "-" * 5000 + "1)]",
    "[f(a=" + "1+" * 20000 + "1)]",
]


def test_no_unsafe_string_reaches_bfcls_executor(entries, tmp_path: Path, monkeypatch):
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as checker

    e = entries["multi_turn_base_0"]
    allowed = class_methods(e.entry)
    truth = {s for turn in e.ground_truth for s in turn}
    seen: list[str] = []
    real = checker.execute_multi_turn_func_call

    def guarded(func_call_list, *args, **kwargs):
        for s in func_call_list:
            assert s in truth or s == REFUSED_CALL or literal_call(s, allowed), s
            seen.append(s)
        return real(func_call_list, *args, **kwargs)

    monkeypatch.setattr(checker, "execute_multi_turn_func_call", guarded)
    marker = tmp_path / "pwned"
    for text in HOSTILE:
        text = text.format(marker=marker)
        for template in ("bfcl", "tool_n1", "json"):
            for scoring in ("official", "corrected"):
                result = [[text, "[]"]] + [["[]"]] * (len(e.ground_truth) - 1)
                assert not score_multi_turn(e, result, template, scoring=scoring).valid
    assert not marker.exists()
    assert REFUSED_CALL in seen and "cd(folder='a')" in seen


@pytest.mark.parametrize("template", ["bfcl", "tool_n1"])
@pytest.mark.parametrize("scoring", ["official", "corrected"])
def test_a_call_bfcl_would_compute_for_minutes_never_reaches_it(entries, template, scoring):
    e = next(x for x in entries.values() if "MathAPI" in x.entry["involved_classes"])
    slow = render_answer([ToolCall("round_number", {"number": 5, "decimal_places": -(10**8)})], template)
    none = render_answer([], template)
    result = [[slow, none]] + [[none]] * (len(e.ground_truth) - 1)
    decoded = decode_result(e, result, template, scoring=scoring)
    calls = [c for turn in decoded.turns for step in turn for c in step]
    assert not any("round_number" in c for c in calls)
    assert (REFUSED_CALL in calls) == (scoring == "official")
    assert not score_multi_turn(e, result, template, scoring=scoring).valid


def test_a_checker_past_its_budget_fails_the_entry(entries, monkeypatch):
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as checker

    from tooltune.evaluation.bfcl import official as bfcl_official

    def spin(*args, **kwargs):
        while True:
            sum(range(100))

    monkeypatch.setattr(checker, "multi_turn_checker", spin)
    monkeypatch.setattr(bfcl_official, "STEP_SECONDS", 0.02)
    e = entries["multi_turn_base_0"]
    verdict = bfcl_official.check_decoded(e, [[] for _ in e.ground_truth])
    assert not verdict.valid and verdict.error.startswith("checker_timeout:")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=120) | st.sampled_from(["[cd(folder='x')]", "[ls(a=true)]", "cd(", "[1+"]),
       template=st.sampled_from(["bfcl", "tool_n1", "hermes"]),
       scoring=st.sampled_from(["official", "corrected"]))
def test_any_completion_is_scored_without_raising(entries, text, template, scoring):
    e = entries["multi_turn_miss_param_0"]
    result = [[text, text] for _ in e.ground_truth]
    v = score_multi_turn(e, result, template, scoring=scoring)
    assert isinstance(v.valid, bool)


def test_every_rule_is_documented():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "evaluation.md").read_text(encoding="utf-8")
    assert all(f"| `{rule}` |" in doc for rule in CORRECTED_RULES)
