"""BFCL's format sensitivity: its 26 configurations, BFCL's prompt per entry, the ground truth written in
every return format (all 5,200 entries pass but the 6 that BFCL's JSON decoder cannot read), verdicts
equal to bfcl-eval's own evaluation of a format-sensitivity entry (`_evaluate_single_ast_entry` with the
open-model handlers' decoder) on real entries, the summary, the subset and the plot."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")
pytestmark = pytest.mark.usefixtures("bfcl_project_root")

from tooltune.evaluation import bfcl  # noqa: E402
from tooltune.evaluation.benchmark import BENCHMARKS  # noqa: E402
from tooltune.evaluation.bfcl.format_sensitivity import (  # noqa: E402
    CONFIGS,
    FormatScorer,
    figure,
    ground_truth_answers,
    load_entries,
    messages,
    question_id,
    summary,
)
from tooltune.evaluation.controls import Controls  # noqa: E402
from tooltune.evaluation.options import EvalOptions  # noqa: E402
from tooltune.evaluation.report import write_report  # noqa: E402
from tooltune.evaluation.runner import evaluate  # noqa: E402
from tooltune.generation import Sampling, ScriptedBackend  # noqa: E402
from tooltune.prompts import resolve_native  # noqa: E402

JSON_UNREADABLE = "simple_python_96"
"""Its ground truth holds a list of objects: BFCL's JSON decoder cuts the answer at the first `}]`."""


@pytest.fixture(scope="module")
def entries() -> list[bfcl.BfclEntry]:
    return load_entries(CONFIGS)


@pytest.fixture(scope="module")
def scorer() -> FormatScorer:
    return FormatScorer()


def test_the_configurations_are_bfcl_evals_own(entries) -> None:
    from bfcl_eval.utils import get_all_format_sensitivity_configs

    assert list(CONFIGS.values()) == get_all_format_sensitivity_configs()
    assert bfcl.expand_categories("format_sensitivity") == list(CONFIGS) == list(bfcl.FORMAT_SENSITIVITY)
    assert "fs_python_doc_json" not in bfcl.expand_categories("all")  # beside the score, run when named
    assert len(entries) == 5200 and {e.category for e in entries} == set(CONFIGS)
    assert len({question_id(e.id) for e in entries}) == 200


def test_the_model_is_shown_bfcls_prompt_of_the_entrys_configuration(entries) -> None:
    e = next(x for x in entries if x.category == "fs_concise_xml_tag_doc_xml")
    shown = messages(e)
    assert shown[0]["role"] == "system" and "<TOOLCALL><functions><function name=" in shown[0]["content"]
    assert "in xml format" in shown[0]["content"] and shown[1] == e.entry["question"][0][0]
    md = messages(next(x for x in entries if x.category == "fs_python_doc_json_markdown"))
    assert "## Tool Call Format" in md[0]["content"]


def test_the_ground_truth_in_every_format_passes_but_where_bfcls_json_decoder_cannot_read_it(entries,
                                                                                             scorer) -> None:
    answers = ground_truth_answers(entries)
    failed = sorted(e.id for e in entries if not scorer.score(e, answers[e.id]).valid)
    assert len(failed) == 6
    assert {question_id(i) for i in failed} == {JSON_UNREADABLE}
    assert {i.split(":")[1].split("&")[0] for i in failed} == {"ret_fmt=json"}


# --- agreement with bfcl-eval's own evaluation ------------------------------------------------------------


class OpenModelHandler:
    """The decoding part of bfcl-eval's open-model handlers (`OSSHandler.decode_ast`)."""

    def decode_ast(self, result: Any, language: Any, has_tool_call_tag: bool) -> Any:
        from bfcl_eval.model_handler.utils import default_decode_ast_prompting

        return default_decode_ast_prompting(result, language, has_tool_call_tag)


def bfcl_eval_verdict(e: bfcl.BfclEntry, result: str) -> dict[str, Any]:
    """bfcl-eval's own evaluation of `result` (as `format_sensitivity_runner` does for one entry)."""
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker.eval_runner import _evaluate_single_ast_entry
    from bfcl_eval.model_handler.utils import parse_prompt_variation_params

    ret, tag, _, _, _ = parse_prompt_variation_params(CONFIGS[e.category])
    prompt = {**copy.deepcopy(e.entry), "function": copy.deepcopy(e.functions)}
    out = _evaluate_single_ast_entry(OpenModelHandler(), e.id, result, copy.deepcopy(e.ground_truth), prompt,
                                     bfcl.NAME_STYLES["dotted"], "format_sensitivity",
                                     language=Language.PYTHON, return_format=ReturnFormat(ret),
                                     has_tool_call_tag=tag)
    return {"valid": bool(out["valid"]), "error_type": out.get("error_type")}


def _perturbations(e: bfcl.BfclEntry, truth: str, other: str) -> dict[str, str]:
    tagged = "<TOOLCALL>" in truth
    first = next(iter(e.ground_truth[0].values()))
    key = next((k for k, v in first.items() if v and isinstance(v[0], str) and v[0]), None)
    wrong = truth.replace(str(first[key][0]), "zz_not_it", 1) if key else truth + "x"
    return {
        "truth": truth,
        "fenced": f"```\n{truth}\n```",
        "prose_around": f"Sure. {truth} Done.",
        "other_format": other,
        "tag_flipped": truth.replace("<TOOLCALL>", "").replace("</TOOLCALL>", "") if tagged
        else f"<TOOLCALL>{truth}</TOOLCALL>",
        "wrong_value": wrong,
        "no_call": "I cannot help with that.",
        "empty": "",
    }


def test_verdicts_equal_bfcl_evals_own_on_real_entries(entries, scorer) -> None:
    """A deterministic quarter of the 200 questions under all 26 configurations, eight answers each."""
    picked = [e for e in entries if int.from_bytes(question_id(e.id).encode(), "big") % 4 == 0]
    answers = ground_truth_answers(picked)
    python = {question_id(e.id): answers[e.id] for e in picked if e.category == "fs_python_doc_json"}
    outcomes: dict[str, set[bool]] = {}
    for e in picked:
        for kind, text in _perturbations(e, answers[e.id], python[question_id(e.id)]).items():
            ours = scorer.score(e, text)
            ref = bfcl_eval_verdict(e, text)
            assert ours.valid == ref["valid"], (e.id, kind, text, ours.error, ref)
            if not ref["valid"]:
                assert ours.error.startswith(f"{ref['error_type']}: "), (e.id, kind, ours.error, ref)
            outcomes.setdefault(kind, set()).add(ours.valid)
    assert len(picked) > 1000
    assert outcomes["no_call"] == outcomes["empty"] == {False} and False in outcomes["wrong_value"]
    assert True in outcomes["truth"] and outcomes["other_format"] == {True, False}


def test_the_summary_is_bfcls_spread_across_configurations() -> None:
    labels = list(CONFIGS)[:3]
    cats = {labels[0]: {"accuracy": 0.5, "correct": 5, "total": 10},
            labels[1]: {"accuracy": 0.8, "correct": 8, "total": 10},
            labels[2]: {"accuracy": 0.2, "correct": 2, "total": 10},
            "multiple": {"accuracy": 1.0, "correct": 4, "total": 4}}
    s = summary(cats)
    assert s == {"accuracy": pytest.approx(0.5), "max_delta": pytest.approx(0.6), "std": pytest.approx(0.3)}
    assert summary({"multiple": cats["multiple"]}) is None
    assert summary({labels[0]: cats[labels[0]]})["std"] == 0.0
    records = [{"id": f"format_sensitivity_{i}:{CONFIGS[c]}:q_{i}", "category": c, "valid": i < k}
               for c, k in ((labels[0], 1), (labels[1], 2)) for i in range(2)]
    assert bfcl.scores(records)["format_sensitivity"]["max_delta"] == pytest.approx(0.5)


def test_a_subset_keeps_the_same_questions_under_every_configuration(tmp_path: Path) -> None:
    controls = Controls()
    backend = ScriptedBackend(BENCHMARKS["bfcl"].answers("format_sensitivity", controls, None))
    s = evaluate("bfcl", [(0, backend)], EvalOptions(
        out=tmp_path / "run", controls=controls, categories="format_sensitivity",
        sampling=Sampling(temperature=0.0), show_progress=False, subset=3, subset_seed=1))
    records = [json.loads(line) for line in (tmp_path / "run" / "verdicts.jsonl").read_text().splitlines()]
    assert len(records) == 78 and s["subset"]["units"] == 78
    per_config = {c: sorted(question_id(r["id"]) for r in records if r["category"] == c) for c in CONFIGS}
    assert len({tuple(q) for q in per_config.values()}) == 1
    assert s["scores"]["format_sensitivity.max_delta"] == pytest.approx(
        max(s["scores"][f"categories.{c}.accuracy"] for c in CONFIGS)
        - min(s["scores"][f"categories.{c}.accuracy"] for c in CONFIGS))
    report = write_report([tmp_path / "run"], tmp_path / "run" / "report.md").read_text()
    assert "![format_sensitivity](report_0_format_sensitivity.png)" in report
    assert (tmp_path / "run" / "report_0_format_sensitivity.png").stat().st_size > 10_000


def test_native_templates_skip_format_sensitivity_with_a_reason() -> None:
    native = Controls(template="native")
    native = native.with_template(resolve_native(None, "native"))  # an endpoint's own format
    prep = BENCHMARKS["bfcl"].prepare("format_sensitivity,multiple", native, None)
    assert {t.category for t in prep.tasks} == {"multiple"}
    assert prep.skipped and "prompt-based" in prep.skipped[0]


def test_the_plot_draws_every_configuration_with_its_spread() -> None:
    ms = {f"categories.{c}.accuracy": {"mean": i / 30, "std": 0.0, "n": 1} for i, c in enumerate(CONFIGS)}
    ms |= {f"categories.{c}.total": {"mean": 200.0, "std": 0.0, "n": 1} for c in CONFIGS}
    ms |= {"format_sensitivity.accuracy": {"mean": 0.4, "std": 0.0, "n": 1},
           "format_sensitivity.max_delta": {"mean": 25 / 30, "std": 0.0, "n": 1}}
    fig = figure(ms, "m")
    try:
        ax = fig.axes[0]
        assert len(ax.patches) == 26 and "max - min 83.3 points" in ax.get_title()
        assert [t.get_text() for t in ax.get_yticklabels()][0] == "fs_python_tag_doc_python (200)"
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    assert figure({k: v for k, v in ms.items() if "fs_python_tag_doc_python" in k}) is None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200) | st.sampled_from(["<functions><function name='x'>", "[{\"function\": 1}]",
                                                   "<TOOLCALL>[f(a=1+)]</TOOLCALL>", "[{}]" * 50]),
       config=st.sampled_from(list(CONFIGS)))
def test_any_answer_is_scored_without_raising(entries, scorer, text: str, config: str) -> None:
    e = next(x for x in entries if x.category == config)
    assert isinstance(scorer.score(e, text).valid, bool)
