"""Comparing two runs: the manifest fields that forbid it, and B - A with its paired standard error."""

from __future__ import annotations

import json
import math

import pytest
from test_evaluation_commands import apibank_run

from tooltune.cli import main
from tooltune.evaluation.comparison import compare_runs
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.report import write_report


def test_compare_flags_non_comparable_runs(tmp_path, shared_data_dir, capsys) -> None:
    a = apibank_run(tmp_path, shared_data_dir, "a", "--scripted", "--categories", "level-1", "--no-report")
    b = apibank_run(tmp_path, shared_data_dir, "b", "--scripted", "--categories", "level-1", "--no-report")
    c = apibank_run(tmp_path, shared_data_dir, "c", "--scripted", "--categories", "level-1", "--no-report",
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


def test_compare_gives_paired_differences_with_standard_errors(tmp_path, shared_data_dir, capsys) -> None:
    """Two runs on the same subset: B - A per score with its paired SE and z, in the JSON and the table."""
    from tooltune.evaluation.scripted import ground_truth_policy
    from tooltune.generation import GenerationRequest

    a = apibank_run(tmp_path, shared_data_dir, "a", "--scripted", "--categories", "level-1", "--subset", "30",
                 "--no-report")
    ids = [json.loads(x)["id"] for x in (a / "verdicts.jsonl").read_text().splitlines()]
    play = ground_truth_policy("apibank", data_dir=shared_data_dir / "apibank",
                               controls=Controls(scoring="corrected"))
    wrong = tmp_path / "wrong.jsonl"  # ten entries answered wrong, the rest right
    answers = {i: "no" if n < 10 else play(GenerationRequest([], id=i)) for n, i in enumerate(ids)}
    wrong.write_text("".join(json.dumps({"id": i, "result": r}) + "\n" for i, r in answers.items()))
    b = apibank_run(tmp_path, shared_data_dir, "b", "--predictions", str(wrong), "--categories", "level-1",
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
