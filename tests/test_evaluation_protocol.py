"""Protocol: resumable verdict log, seeds mean ± std, manifest, compare, report (CLI on API-Bank)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tooltune.cli import main
from tooltune.evaluation.protocol import (
    Controls,
    VerdictLog,
    aggregate_seeds,
    build_manifest,
    compare_runs,
    mean_std,
    run_identity,
)
from tooltune.evaluation.report import write_report


def test_verdict_log_resumes_and_drops_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    with VerdictLog(path) as log:
        log.add({"id": "a", "category": "c", "valid": True, "error": None, "seed": 0})
        log.add({"id": "b", "category": "c", "valid": False, "error": "x", "seed": 0})
    with open(path, "a") as f:
        f.write('{"id": "c", "categ')  # a crash in the middle of a write
    with VerdictLog(path, resume=True) as log:
        assert log.done == {(0, "a"), (0, "b")}
        log.add({"id": "c", "category": "c", "valid": True, "error": None, "seed": 0})
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["id"] for r in lines] == ["a", "b", "c"]
    with VerdictLog(path) as log:  # no resume: start over
        assert log.done == set()
    assert path.read_text() == ""


def test_verdict_log_counts_each_seed_and_id_once(tmp_path: Path) -> None:
    """Repeated (seed, id) lines (two writers) count once and are dropped from the file on resume; a line
    separator inside a value does not split a verdict; adding a finished (seed, id) again is ignored."""
    path = tmp_path / "v.jsonl"
    rows = [{"id": "a", "category": "c", "valid": True, "error": None, "seed": 0},
            {"id": "a", "category": "c", "valid": False, "error": "x\u2028y", "seed": 1}]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text + "not json\n" + text, encoding="utf-8")
    with VerdictLog(path, resume=True) as log:
        assert log.done == {(0, "a"), (1, "a")} and log.records == rows
        log.add({**rows[0], "valid": False})
        assert log.records == rows
    assert path.read_text(encoding="utf-8") == text


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


def test_manifest_records_controls_hashes_and_versions(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text("[]")
    c = Controls(template="r2if", system_prompt="bfcl_strong", history="context", keep_reasoning=False)
    m = build_manifest("apibank", ["level-1"], c, [0, 1], "m", "hf:m", [data])
    assert m["controls"]["history"] == "context" and m["controls"]["keep_reasoning"] is False
    assert m["system_prompt_sha256"] != build_manifest("apibank", ["level-1"], Controls(template="r2if"),
                                                       [0], "m", "hf:m", [data])["system_prompt_sha256"]
    assert set(m["data_sha256"]) == {"d.json"} and "tooltune" in m["packages"]
    assert m["predictions_sha256"] == {}


def test_run_identity_is_the_manifest_fields_that_define_the_results(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text("[]")
    c = Controls(system_prompt="literal text")
    m = build_manifest("bfcl", ["simple_python"], c, [0], "m", "replay:p.jsonl", [data],
                       {"temperature": 0.0, "partial": False}, predictions_sha256={"0": "ab"})
    ident = run_identity(m)
    assert ident["command"] == "eval" and ident["mode"] == "strict" and ident["temperature"] == 0.0
    assert ident["predictions_sha256"] == {"0": "ab"} and ident["data_sha256"] == m["data_sha256"]
    assert "system_prompt" not in ident and ident["system_prompt_sha256"] == m["system_prompt_sha256"]
    assert set(ident["packages"]) == {"tooltune", "bfcl-eval"} and "python" not in ident
    assert set(run_identity({**m, "benchmark": "apibank"})["packages"]) == {"tooltune"}
    # what is recorded but does not change verdicts leaves the identity alone
    assert run_identity({**m, "python": "0.0", "packages": {**m["packages"], "torch": "9"}}) == ident


def _apibank(tmp_path: Path, shared_data_dir: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    # the corrected rules score every ground truth right (official ones fail some: test_evaluation_apibank)
    rc = main(["eval", "apibank", "--data-dir", str(shared_data_dir / "apibank"), "--out", str(out),
               "--scoring", "corrected", *extra])
    assert rc == 0
    return out


def test_apibank_scripted_scores_100_and_replay_seeds_give_mean_and_std(tmp_path, shared_data_dir) -> None:
    gold = _apibank(tmp_path, shared_data_dir, "gold", "--scripted")
    summary = json.loads((gold / "summary.json").read_text())
    assert summary["scores"]["overall"] == 1.0
    assert summary["per_seed"]["0"]["categories"]["level-1"]["total"] == 399
    assert summary["per_seed"]["0"]["categories"]["level-2"]["total"] == 135
    assert (gold / "report.md").exists() and list(gold.glob("report_0_apibank.png"))
    # seed 0 replays the scripted answers of level-1 only; seed 1 answers nothing
    from tooltune.evaluation.scripted import ground_truth_policy
    from tooltune.generation import GenerationRequest

    play = ground_truth_policy("apibank", data_dir=shared_data_dir / "apibank",
                               controls=Controls(scoring="corrected"))
    ids = [r["id"] for r in map(json.loads, (gold / "verdicts.jsonl").read_text().splitlines())]
    p0, p1 = tmp_path / "p0.jsonl", tmp_path / "p1.jsonl"
    p0.write_text("".join(json.dumps({"id": i, "result": play(GenerationRequest([], id=i)) if
                                      i.startswith("level-1") else "no"}) + "\n" for i in ids))
    p1.write_text("".join(json.dumps({"id": i, "result": "no"}) + "\n" for i in ids[:10]))
    run = _apibank(tmp_path, shared_data_dir, "seeds", "--predictions", f"{p0},{p1}", "--no-report")
    s = json.loads((run / "summary.json").read_text())
    assert s["seeds"] == [0, 1]
    lv1 = s["mean_std"]["categories.level-1.accuracy"]
    assert lv1["mean"] == pytest.approx(0.5) and lv1["std"] == pytest.approx(math.sqrt(0.5))
    verdicts = [json.loads(x) for x in (run / "verdicts.jsonl").read_text().splitlines()]
    assert sum(1 for v in verdicts if v["error"] == "missing_prediction") == len(ids) - 10

    # resume after losing the tail of the file: finished ids are kept, the rest is redone once
    kept = (run / "verdicts.jsonl").read_text().splitlines()[:100]
    (run / "verdicts.jsonl").write_text("\n".join(kept) + "\n")
    _apibank(tmp_path, shared_data_dir, "seeds", "--predictions", f"{p0},{p1}", "--no-report", "--resume")
    again = [json.loads(x) for x in (run / "verdicts.jsonl").read_text().splitlines()]
    assert sorted((v["seed"], v["id"]) for v in again) == sorted((v["seed"], v["id"]) for v in verdicts)


def test_compare_flags_non_comparable_runs(tmp_path, shared_data_dir, capsys) -> None:
    a = _apibank(tmp_path, shared_data_dir, "a", "--scripted", "--categories", "level-1", "--no-report")
    b = _apibank(tmp_path, shared_data_dir, "b", "--scripted", "--categories", "level-1", "--no-report")
    c = _apibank(tmp_path, shared_data_dir, "c", "--scripted", "--categories", "level-1", "--no-report",
                 "--history", "context", "--system-prompt", "bfcl_strong")
    assert compare_runs(a, b)["comparable"]
    result = compare_runs(a, c)
    assert not result["comparable"]
    assert {x["field"] for x in result["blockers"]} == {"controls", "system_prompt_sha256"}
    capsys.readouterr()
    assert main(["eval", "compare", str(a), str(c)]) == 1
    assert "NOT COMPARABLE: controls" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="not an evaluation run folder"):
        compare_runs(a, tmp_path)
    md = write_report([a, c], tmp_path / "rep" / "r.md")
    text = md.read_text()
    assert "| level-1 | 100.0 | 0.0 | 399 |" in text and "(one category: no chart)" in text
    assert "Entries: all entries" in text
    assert not list((tmp_path / "rep").glob("*.png"))  # one category each: a table, no one-bar chart


def test_cli_rejects_ambiguous_sources(tmp_path, shared_data_dir, capsys) -> None:
    assert main(["eval", "apibank", "--data-dir", str(shared_data_dir / "apibank"), "--out", str(tmp_path),
                 "--scripted", "--model", "x"]) == 2
    assert "--scripted plays the ground truth; drop --model" in capsys.readouterr().err
    assert main(["eval", "apibank", "--data-dir", str(shared_data_dir / "apibank"), "--out", str(tmp_path),
                 "--model", "x", "--endpoint", "http://127.0.0.1:9/v1"]) == 2
    assert "got model and endpoint" in capsys.readouterr().err
    assert main(["eval", "apibank", "--data-dir", str(tmp_path / "nope"), "--out", str(tmp_path),
                 "--scripted"]) == 2


def test_compare_gives_paired_differences_with_standard_errors(tmp_path, shared_data_dir, capsys) -> None:
    """Two runs on the same subset: B - A per score with its paired SE and z, in the JSON and the table."""
    from tooltune.evaluation.scripted import ground_truth_policy
    from tooltune.generation import GenerationRequest

    a = _apibank(tmp_path, shared_data_dir, "a", "--scripted", "--categories", "level-1", "--subset", "30",
                 "--no-report")
    ids = [json.loads(x)["id"] for x in (a / "verdicts.jsonl").read_text().splitlines()]
    play = ground_truth_policy("apibank", data_dir=shared_data_dir / "apibank",
                               controls=Controls(scoring="corrected"))
    wrong = tmp_path / "wrong.jsonl"  # ten entries answered wrong, the rest right
    answers = {i: "no" if n < 10 else play(GenerationRequest([], id=i)) for n, i in enumerate(ids)}
    wrong.write_text("".join(json.dumps({"id": i, "result": r}) + "\n" for i, r in answers.items()))
    b = _apibank(tmp_path, shared_data_dir, "b", "--predictions", str(wrong), "--categories", "level-1",
                 "--subset", "30", "--no-report")
    paired = compare_runs(a, b)["paired"]
    got = paired["scores"]["overall"]
    assert paired["units"] == 30 and got["delta"] == pytest.approx(-1 / 3)
    d = [-1.0] * 10 + [0.0] * 20
    var = sum((x + 1 / 3) ** 2 for x in d) / 29
    assert got["se"] == pytest.approx(math.sqrt(var / 30))
    assert got["z"] == pytest.approx(got["delta"] / got["se"])
    capsys.readouterr()
    main(["eval", "compare", str(a), str(b)])
    out = capsys.readouterr().out
    assert "paired over the 30 units both runs scored" in out
    row = next(line for line in out.splitlines() if line.startswith("overall "))
    assert row.split()[1:] == ["100.00", "66.67", "-33.33", f"{100 * got['se']:.2f}", f"{got['z']:+.2f}"]
