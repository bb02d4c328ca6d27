"""Mean ± std over seeds, standard errors over entries of every score, and paired differences between two
runs on the same entries: the stratified jackknife against the closed forms it must equal."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tooltune.evaluation.benchmark import BENCHMARKS
from tooltune.evaluation.uncertainty import (
    aggregate_seeds,
    flatten_numbers,
    mean_std,
    paired_differences,
    read_verdicts,
    seed_mean_scores,
    standard_errors,
)


def _records(category: str, verdicts: list[int], seed: int = 0, prefix: str = "") -> list[dict]:
    return [{"id": f"{prefix}{category}_{i}", "category": category, "valid": bool(v), "error": None,
             "seed": seed} for i, v in enumerate(verdicts)]


def _sample_var(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def test_one_categorys_accuracy_has_the_usual_standard_error() -> None:
    verdicts = [1] * 13 + [0] * 7
    se = standard_errors(BENCHMARKS["apibank"], _records("level-2", verdicts))
    assert se["categories.level-2.accuracy"] == pytest.approx(math.sqrt(_sample_var(verdicts) / 20))
    assert not any(k.endswith((".correct", ".total")) for k in se)  # counts are no scores


def test_bfcls_mean_of_category_means_gets_the_stratified_closed_form() -> None:
    cats = {"simple_python": [1] * 6 + [0] * 4, "simple_java": [1, 0, 0, 0, 1],
            "simple_javascript": [1, 1, 1, 0], "multiple": [0] * 3 + [1] * 9, "parallel": [1, 0] * 4,
            "parallel_multiple": [1, 1, 0, 0, 0, 0]}
    records = [r for c, v in cats.items() for r in _records(c, v)]
    se = standard_errors(BENCHMARKS["bfcl"], records)
    # non-live = mean(simple, multiple, parallel, parallel_multiple), simple = mean of its three languages
    weights = {"simple_python": 1 / 12, "simple_java": 1 / 12, "simple_javascript": 1 / 12, "multiple": 1 / 4,
               "parallel": 1 / 4, "parallel_multiple": 1 / 4}
    expected = math.sqrt(sum(w ** 2 * _sample_var(cats[c]) / len(cats[c]) for c, w in weights.items()))
    assert se["table2.non_live.overall"] == pytest.approx(expected)
    assert se["leaderboard.non_live"] == pytest.approx(expected)


def test_a_unit_is_left_out_of_every_seed_at_once() -> None:
    seed0, seed1 = [1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 1, 1]
    records = _records("level-1", seed0, 0) + _records("level-1", seed1, 1)
    bench = BENCHMARKS["apibank"]
    assert seed_mean_scores(bench, records)["overall"] == pytest.approx(0.5)
    unit_means = [(a + b) / 2 for a, b in zip(seed0, seed1)]
    se = standard_errors(bench, records)["overall"]
    assert se == pytest.approx(math.sqrt(_sample_var(unit_means) / len(unit_means)))


def test_a_paired_difference_counts_only_the_entries_the_runs_disagree_on() -> None:
    bench = BENCHMARKS["apibank"]
    a = _records("level-1", [0] * 10 + [1] * 10)
    assert paired_differences(bench, a, a)["scores"]["overall"] == {"a": 0.5, "b": 0.5, "delta": 0.0,
                                                                   "se": 0.0, "z": None}
    b = _records("level-1", [1, 1, 1] + [0] * 7 + [1] * 9 + [0])  # three gained, one lost
    result = paired_differences(bench, a, b)
    d = [vb["valid"] - va["valid"] for va, vb in zip(a, b)]
    got = result["scores"]["categories.level-1.accuracy"]
    assert got["delta"] == pytest.approx(0.1)
    assert got["se"] == pytest.approx(math.sqrt(_sample_var(d) / 20))
    assert got["z"] == pytest.approx(0.1 / got["se"])
    assert result["units"] == 20 and result["only_a"] == result["only_b"] == 0


def test_paired_differences_use_only_the_units_both_runs_scored() -> None:
    bench = BENCHMARKS["apibank"]
    a = _records("level-1", [1, 0, 1, 0, 1])
    b = _records("level-1", [1, 0, 1, 1])  # its fifth entry was never scored
    result = paired_differences(bench, a, b)
    assert (result["units"], result["only_a"], result["only_b"]) == (4, 1, 0)
    assert result["scores"]["overall"]["a"] == pytest.approx(0.5)
    assert result["scores"]["overall"]["delta"] == pytest.approx(0.25)


def test_acebench_dialogues_are_the_units_of_their_standard_error() -> None:
    category = "normal_multi_turn_user_adjust"
    turns = {0: [1, 1], 1: [1, 0], 2: [0, 0], 3: [1, 1]}  # dialogues 0 and 3 right: accuracy 0.5
    records = [{"id": f"{category}_{d}_{t}", "category": category, "valid": bool(v), "seed": 0}
               for d, vs in turns.items() for t, v in enumerate(vs)]
    se = standard_errors(BENCHMARKS["acebench"], records)
    assert se[f"categories.{category}.accuracy"] == pytest.approx(math.sqrt(_sample_var([1, 0, 0, 1]) / 4))


def test_read_verdicts_skips_lines_that_are_not_verdicts_and_repeats(tmp_path: Path) -> None:
    rows = _records("level-1", [1, 0])
    (tmp_path / "verdicts.jsonl").write_text(
        json.dumps(rows[0]) + "\n[1, 2]\n{\"id\": 3}\nnot json\n" + json.dumps(rows[1]) + "\n"
        + json.dumps({**rows[0], "valid": False}) + "\n")
    assert read_verdicts(tmp_path) == rows
    with pytest.raises(FileNotFoundError, match="verdicts.jsonl missing"):
        read_verdicts(tmp_path / "nothing")
    assert flatten_numbers({"a": {"b": 1, "c": None, "d": True}, "e": 0.5}) == {"a.b": 1.0, "e": 0.5}


@given(st.lists(st.floats(0, 1), min_size=1, max_size=8))
def test_mean_std_matches_the_sample_formula(values: list[float]) -> None:
    got = mean_std(values)
    mean = sum(values) / len(values)
    assert got["mean"] == pytest.approx(mean)
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1) if len(values) > 1 else 0.0
    assert got["std"] == pytest.approx(math.sqrt(var), abs=1e-12)


def test_aggregate_seeds_flattens_nested_scores() -> None:
    agg = aggregate_seeds({0: {"a": {"b": 0.5}, "c": None}, 1: {"a": {"b": 1.0}, "c": None}})
    assert set(agg) == {"a.b"} and agg["a.b"]["mean"] == 0.75 and agg["a.b"]["n"] == 2
