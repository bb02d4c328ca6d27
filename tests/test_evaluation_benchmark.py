"""The benchmark interface: the registry, a benchmark added as one module, and the scoring mode recorded,
labelled and enforced wherever results are kept or compared."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tooltune.cli import build_parser, main
from tooltune.config import UnknownName
from tooltune.evaluation.benchmark import (
    BENCHMARKS,
    AceGold,
    Benchmark,
    Prepared,
    ProvidesAceGold,
    answer_policy,
    register_benchmark,
    single_turn_task,
)
from tooltune.evaluation.comparison import compare_runs
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.options import EvalOptions
from tooltune.evaluation.report import write_report
from tooltune.evaluation.runner import evaluate
from tooltune.evaluation.scripted import ground_truth_policy
from tooltune.evaluation.verdict import Verdict, category_accuracy
from tooltune.generation import ScriptedBackend
from tooltune.prompts import render_answer
from tooltune.rundir import RunMismatch
from tooltune.schema import Sample, Scoring, ToolCall, ToolSpec


def test_the_registry_holds_the_built_in_benchmarks_and_names_the_closest_for_a_typo() -> None:
    assert BENCHMARKS.names() == ("bfcl", "apibank", "acebench", "mcp")
    assert BENCHMARKS["bfcl"].uses_data_dir is False and BENCHMARKS["apibank"].uses_data_dir
    with pytest.raises(UnknownName, match="benchmark: unknown benchmark 'apibenk' \\(did you mean apibank"):
        BENCHMARKS["apibenk"]
    with pytest.raises(ValueError, match="already registered"):
        register_benchmark(type("OtherBfcl", (ToyBenchmark,), {"name": "bfcl"}))


_TOOL = ToolSpec("add", "Add two integers.", {"type": "object", "properties": {
    "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]})


def _samples() -> list[Sample]:
    return [Sample(f"toy-{i}", "toy", "simple", [{"role": "user", "content": f"add {i} and 1"}], [_TOOL],
                   [ToolCall("add", {"a": i, "b": 1})]) for i in range(4)]


def _score(sample: Sample, text: str, controls: Controls) -> Verdict:
    from tooltune.matching import exact_match
    from tooltune.prompts import grammar_for

    ok = exact_match(text, sample.answer, grammar_for(controls.template))
    if controls.scoring == Scoring.CORRECTED:  # a toy "fix": the corrected rules accept everything
        ok = True
    return Verdict(sample.id, "toy", bool(ok), None if ok else "wrong call")


class ToyBenchmark(ProvidesAceGold, Benchmark):
    """A whole benchmark in one class: what a user adds in one module."""

    name = "toy"
    help = "A four-entry toy benchmark."
    uses_data_dir = False

    def prepare(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Prepared:
        tasks = [single_turn_task(s, "toy", controls, lambda text, s=s: _score(s, text, controls))
                 for s in _samples()]
        return Prepared(tasks, [])

    def scores(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        cats = category_accuracy(records)
        return {"categories": cats, "overall": cats["toy"]["accuracy"] if cats else None}

    def answers(self, categories: Any, controls: Controls, data_dir: Path | None) -> Any:
        return answer_policy({s.id: render_answer(s.answer, controls.template) for s in _samples()})

    def ace_gold(self, categories: Any, controls: Controls, data_dir: Path | None) -> AceGold:
        return AceGold(["toy"], ["toy"], {s.id: s.answer for s in _samples()}, {})


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Benchmark:
    monkeypatch.setattr(BENCHMARKS, "_items", dict(BENCHMARKS.items()))
    register_benchmark(ToyBenchmark)
    return BENCHMARKS["toy"]


def test_a_benchmark_added_in_one_class_runs_through_the_runner_the_self_check_and_the_cli(
    toy: Benchmark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    perfect = ScriptedBackend(ground_truth_policy("toy"), name="scripted")
    summary = evaluate("toy", [(0, perfect)], EvalOptions(out=tmp_path / "lib", show_progress=False))
    assert summary["scores"]["overall"] == 1.0 and summary["scoring"] == "official"
    wrong = ScriptedBackend(lambda r: render_answer([ToolCall("add", {"a": 0, "b": 1})], "tool_n1"))
    assert evaluate("toy", [(0, wrong)], EvalOptions(
        out=tmp_path / "wrong", show_progress=False))["scores"]["overall"] == 0.25
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "--help"])
    assert "A four-entry toy benchmark." in capsys.readouterr().out
    assert main(["eval", "toy", "--scripted", "--out", str(tmp_path / "cli"), "--report", "false"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"] == 1.0


def test_the_scoring_mode_is_recorded_labelled_and_part_of_the_run_identity(toy: Benchmark, tmp_path: Path
                                                                            ) -> None:
    wrong = ScriptedBackend(lambda r: "no call")
    official = evaluate("toy", [(0, wrong)], EvalOptions(out=tmp_path / "off", show_progress=False))
    corrected = evaluate("toy", [(0, wrong)], EvalOptions(
        out=tmp_path / "cor", controls=Controls(scoring="corrected"), show_progress=False))
    assert (official["scores"]["overall"], corrected["scores"]["overall"]) == (0.0, 1.0)
    manifest = json.loads((tmp_path / "cor" / "manifest.json").read_text())
    assert manifest["controls"]["scoring"] == "corrected"
    with pytest.raises(RunMismatch, match="scoring"):
        evaluate("toy", [(0, wrong)], EvalOptions(
            out=tmp_path / "off", controls=Controls(scoring="corrected"), resume=True, show_progress=False))
    result = compare_runs(tmp_path / "off", tmp_path / "cor")
    assert not result["comparable"] and result["blockers"][0]["field"] == "controls.scoring"
    text = write_report([tmp_path / "off", tmp_path / "cor"], tmp_path / "report.md").read_text()
    assert "official scoring" in text and "corrected scoring" in text and "not comparable" in text


def test_official_is_the_default_scoring_of_every_entry_point_that_reports_a_benchmark_number() -> None:
    import inspect

    from tooltune.evaluation import apibank
    from tooltune.evaluation.acebench import scoring as acebench_scoring
    from tooltune.evaluation.acebench.agent import AgentConfig
    from tooltune.evaluation.bfcl.multiturn import run_multi_turn
    from tooltune.evaluation.bfcl.official import score_multi_turn, score_multi_turn_predictions

    for entry_point in (run_multi_turn, score_multi_turn, score_multi_turn_predictions, apibank.score,
                        acebench_scoring.score):
        assert inspect.signature(entry_point).parameters["scoring"].default is Scoring.OFFICIAL, entry_point
    assert Controls().scoring is Scoring.OFFICIAL and AgentConfig().scoring is Scoring.OFFICIAL
    assert Controls(scoring="corrected").scoring is Scoring.CORRECTED
    assert json.dumps({"scoring": Scoring.CORRECTED}) == '{"scoring": "corrected"}'
