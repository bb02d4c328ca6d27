"""The evaluation report's charts: one per run of two categories or more, accuracy in percent on a full,
labelled axis with ± 1 binomial standard error per category; a run of one category gets its table only,
and a benchmark table none of whose columns was run is not printed as dashes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tooltune.evaluation.report import category_figure, write_report


def _run(folder: Path, benchmark: str, categories: dict[str, tuple[float, int]]) -> Path:
    """A run folder as the evaluation runner writes it: summary.json (mean_std over one seed) + manifest."""
    folder.mkdir(parents=True)
    mean_std = {}
    for name, (acc, total) in categories.items():
        mean_std[f"categories.{name}.accuracy"] = {"mean": acc, "std": 0.0, "n": 1}
        mean_std[f"categories.{name}.total"] = {"mean": float(total), "std": 0.0, "n": 1}
    summary = {"benchmark": benchmark, "seeds": [0], "mean_std": mean_std}
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "manifest.json").write_text(json.dumps({"model": "m", "template": "tool_n1",
                                                      "controls": {"scoring": "official"}}))
    return folder


def test_a_category_chart_shows_standard_errors_on_a_labelled_full_axis(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    run = _run(tmp_path / "a", "apibank", {"level-1": (0.9, 400), "level-2": (0.5, 100)})
    fig = category_figure({"folder": run, **{k: json.loads((run / f"{k}.json").read_text())
                                            for k in ("summary", "manifest")}})
    try:
        ax = fig.axes[0]
        assert ax.get_ylabel().startswith("accuracy (%)") and ax.get_xlabel() == "category (entries)"
        assert ax.get_ylim() == (0, 105)
        from matplotlib.container import BarContainer

        bars = next(c for c in ax.containers if isinstance(c, BarContainer))
        assert [round(b.get_height(), 6) for b in bars.patches] == [90.0, 50.0]
        segments = bars.errorbar.lines[2][0].get_segments()
        half_widths = [(seg[1][1] - seg[0][1]) / 2 for seg in segments]
        assert half_widths == pytest.approx([100 * math.sqrt(0.9 * 0.1 / 400), 100 * math.sqrt(0.25 / 100)])
        assert "standard error" in ax.get_title()
    finally:
        plt.close(fig)


def test_a_run_of_one_category_gets_its_table_and_no_chart(tmp_path: Path) -> None:
    one = _run(tmp_path / "one", "bfcl", {"simple_python": (1.0, 400)})
    two = _run(tmp_path / "two", "apibank", {"level-1": (0.9, 400), "level-2": (0.5, 100)})
    text = write_report([one, two], tmp_path / "rep" / "r.md").read_text()
    assert "| simple_python | 100.0 | – | 400 |" in text and "(one category: no chart)" in text  # no SE kept
    assert sorted(p.name for p in (tmp_path / "rep").glob("*.png")) == ["r_1_apibank.png"]
    # BFCL's Table-2 and leaderboard tables: none of their columns was run, so no row of dashes
    assert "None of this table's columns was run." in text
    assert "| – | – |" not in text


def test_the_report_states_the_subset_and_each_scores_standard_error(tmp_path: Path) -> None:
    run = _run(tmp_path / "sub", "bfcl", {"simple_python": (0.5, 20), "multiple": (0.25, 20)})
    summary = json.loads((run / "summary.json").read_text())
    summary["mean_std"]["table2.non_live.multiple"] = {"mean": 0.25, "std": 0.0, "n": 1}
    summary["standard_errors"] = {"categories.simple_python.accuracy": 0.1147,
                                  "categories.multiple.accuracy": 0.0993, "table2.non_live.multiple": 0.0993}
    summary["subset"] = {"per_category": 20, "seed": 0, "units": 40, "entries": 40,
                         "categories": {"multiple": {"units": 20, "available": 200, "entries": 20},
                                        "simple_python": {"units": 20, "available": 400, "entries": 20}}}
    (run / "summary.json").write_text(json.dumps(summary))
    text = write_report([run], tmp_path / "rep" / "r.md").read_text()
    assert ("Entries: subset: at most 20 per category, seed 0; 40 units, 40 entries "
            "(multiple 20/200, simple_python 20/400)") in text
    assert "| simple_python | 50.0 | 11.5 | 20 |" in text and "| multiple | 25.0 | 9.9 | 20 |" in text
    assert "| 25.0 (SE 9.9) |" in text  # the Table-2 cell of non-live multiple


def test_bfcl_v4_parts_not_run_offline_are_named_and_the_overall_labelled_partial(tmp_path: Path) -> None:
    run = _run(tmp_path / "v4", "bfcl", {"memory_kv": (0.5, 155), "multiple": (0.25, 200)})
    summary = json.loads((run / "summary.json").read_text())
    summary["mean_std"].update({k: {"mean": v, "std": 0.0, "n": 1} for k, v in
                                {"leaderboard.memory": 0.5, "leaderboard.overall_partial": 0.42,
                                 "leaderboard.overall_ceiling": 0.8}.items()})
    (run / "summary.json").write_text(json.dumps(summary))
    text = write_report([run], tmp_path / "rep" / "r.md").read_text()
    assert "| 50.0 | not run (needs internet) | not computed (needs web search) | not computed (needs web " \
           "search) |" in text
    assert "## BFCL v4 overall offline: partial, NOT the leaderboard's overall (%)" in text
    assert "| 42.0 | 80.0 |" in text
