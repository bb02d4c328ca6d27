"""Generation through the CLI: a local tiny HF model over seeds, and an OpenAI-compatible endpoint."""

from __future__ import annotations

import json
from pathlib import Path

from test_generation_backends import _FakeServer

from tooltune.cli import main


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _ace_subset(shared_data_dir: Path, dest: Path, category: str, n: int) -> Path:
    """The first n entries of one real ACEBench category (a tiny CPU model is slow on long prompts)."""
    for sub in ("", "possible_answer"):
        (dest / sub).mkdir(parents=True, exist_ok=True)
        lines = (shared_data_dir / "acebench" / sub / f"data_{category}.json").read_text().splitlines()
        (dest / sub / f"data_{category}.json").write_text("\n".join(lines[:n]) + "\n")
    return dest


def test_local_model_over_two_seeds(tmp_path, shared_data_dir, tiny_model_dir) -> None:
    out = tmp_path / "hf"
    data = _ace_subset(shared_data_dir, tmp_path / "ace", "special_irrelevant", 3)
    rc = main(["eval", "acebench", "--model", str(tiny_model_dir), "--data-dir", str(data),
               "--seeds", "2", "--max-new-tokens", "4", "--out", str(out)])
    assert rc == 0
    verdicts = _lines(out / "verdicts.jsonl")
    assert sorted({v["seed"] for v in verdicts}) == [0, 1] and len(verdicts) == 6
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backend"].startswith("hf:") and manifest["seeds"] == [0, 1]
    assert manifest["sampling"]["temperature"] == 0.7
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_std"]["categories.special_irrelevant.accuracy"]["n"] == 2
    assert (out / "report.md").read_text().count("special_irrelevant") >= 1
    # the raw completions are a predictions file: replaying seed 1 reproduces its verdicts
    again = tmp_path / "again"
    assert main(["eval", "acebench", "--predictions", str(out / "completions_seed1.jsonl"),
                 "--data-dir", str(data), "--out", str(again), "--no-report"]) == 0
    replayed = {v["id"]: v["valid"] for v in _lines(again / "verdicts.jsonl")}
    assert replayed == {v["id"]: v["valid"] for v in verdicts if v["seed"] == 1}


def test_endpoint_backend_through_the_cli(tmp_path, shared_data_dir) -> None:
    out = tmp_path / "api"
    with _FakeServer() as server:
        rc = main(["eval", "apibank", "--endpoint", server.url, "--model-name", "served", "--seeds", "1",
                   "--categories", "level-2", "--temperature", "0", "--out", str(out), "--no-report",
                   "--data-dir", str(shared_data_dir / "apibank")])
    assert rc == 0
    verdicts = _lines(out / "verdicts.jsonl")
    assert len(verdicts) == 135 and not any(v["valid"] for v in verdicts)  # the server only echoes
    assert all(v["error"].startswith("decode_failed") for v in verdicts)
    assert len(server.bodies) == 135 and server.bodies[0]["model"] == "served"
    assert server.bodies[0]["messages"][0]["role"] == "system"
