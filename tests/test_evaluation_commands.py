"""`tooltune eval` end to end on API-Bank: the scripted self-check, replayed predictions over seeds, resume,
and the errors of the backend flags."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tooltune.cli import main
from tooltune.evaluation.controls import Controls


def apibank_run(tmp_path: Path, shared_data_dir: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    # the corrected rules score every ground truth right (official ones fail some: test_evaluation_apibank)
    rc = main(["eval", "apibank", "--data-dir", str(shared_data_dir / "apibank"), "--out", str(out),
               "--scoring", "corrected", *extra])
    assert rc == 0
    return out


def test_apibank_scripted_scores_100_and_replay_seeds_give_mean_and_std(tmp_path, shared_data_dir) -> None:
    gold = apibank_run(tmp_path, shared_data_dir, "gold", "--scripted")
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
    run = apibank_run(tmp_path, shared_data_dir, "seeds", "--predictions", f"{p0},{p1}", "--no-report")
    s = json.loads((run / "summary.json").read_text())
    assert s["seeds"] == [0, 1]
    lv1 = s["mean_std"]["categories.level-1.accuracy"]
    assert lv1["mean"] == pytest.approx(0.5) and lv1["std"] == pytest.approx(math.sqrt(0.5))
    verdicts = [json.loads(x) for x in (run / "verdicts.jsonl").read_text().splitlines()]
    assert sum(1 for v in verdicts if v["error"] == "missing_prediction") == len(ids) - 10

    # resume after losing the tail of the file: finished ids are kept, the rest is redone once
    kept = (run / "verdicts.jsonl").read_text().splitlines()[:100]
    (run / "verdicts.jsonl").write_text("\n".join(kept) + "\n")
    apibank_run(tmp_path, shared_data_dir, "seeds", "--predictions", f"{p0},{p1}", "--no-report", "--resume")
    again = [json.loads(x) for x in (run / "verdicts.jsonl").read_text().splitlines()]
    assert sorted((v["seed"], v["id"]) for v in again) == sorted((v["seed"], v["id"]) for v in verdicts)


def test_cli_rejects_ambiguous_sources(tmp_path, shared_data_dir, capsys) -> None:
    assert main(["eval", "apibank", "--data-dir", str(shared_data_dir / "apibank"), "--out", str(tmp_path),
                 "--scripted", "--model", "x"]) == 2
    assert "--scripted plays the ground truth; drop --model" in capsys.readouterr().err
    assert main(["eval", "apibank", "--data-dir", str(shared_data_dir / "apibank"), "--out", str(tmp_path),
                 "--model", "x", "--endpoint", "http://127.0.0.1:9/v1"]) == 2
    assert "got model and endpoint" in capsys.readouterr().err
    assert main(["eval", "apibank", "--data-dir", str(tmp_path / "nope"), "--out", str(tmp_path),
                 "--scripted"]) == 2
