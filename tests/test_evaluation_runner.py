"""Generation through the CLI (a local tiny HF model over seeds, an OpenAI-compatible endpoint), the one set
of protocol defaults shared by the library and the CLI, and where benchmark data is read from."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from test_generation_backends import _FakeServer

from tooltune.cli import build_parser, main
from tooltune.config import describe
from tooltune.evaluation import commands as eval_commands
from tooltune.evaluation import runner
from tooltune.evaluation.protocol import Controls
from tooltune.evaluation.runner import Prepared, RunOptions, Task
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import BackendConfig, Sampling, ScriptedBackend


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


def test_library_and_cli_evaluation_defaults_are_the_same(tmp_path, monkeypatch) -> None:
    """One protocol: `evaluate(benchmark, backend, out)` and `tooltune eval` without flags both sample at
    temperature 0.7 over 3 seeds with the default controls."""
    assert (Sampling().temperature, Sampling().max_new_tokens, Sampling().batch_size) == (0.7, 512, 16)
    assert RunOptions().seeds == 3
    args = build_parser().parse_args(["eval", "bfcl", "--out", str(tmp_path)])
    opts, controls, sampling, backend = eval_commands._configs(args)
    assert (opts, controls, sampling) == (RunOptions(out=str(tmp_path)), Controls(), Sampling())
    assert backend == BackendConfig(batch_size=Sampling().batch_size)

    task = Task("t0", "simple", [{"role": "user", "content": "q"}], lambda _: Verdict("t0", "simple", True))
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: Prepared([task], [], lambda recs: {}, []))
    seen = []
    backend = ScriptedBackend(lambda r: seen.append((r.seed, r.temperature)) or "x")
    runner.evaluate("apibank", backend, tmp_path / "lib", show_progress=False)
    manifest = json.loads((tmp_path / "lib" / "manifest.json").read_text())
    assert manifest["seeds"] == [0, 1, 2] and seen == [(0, 0.7), (1, 0.7), (2, 0.7)]
    assert manifest["sampling"] == {**asdict(Sampling()), "partial": False}
    assert manifest["controls"] == asdict(Controls())


def test_missing_data_dir_exits_2_naming_the_option_and_the_variable(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("TOOLTUNE_DATA_DIR", raising=False)
    assert main(["eval", "apibank", "--scripted", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--data-dir" in err and "TOOLTUNE_DATA_DIR" in err
    monkeypatch.setenv("TOOLTUNE_DATA_DIR", str(tmp_path))  # set, but without an acebench/ folder
    assert main(["eval", "acebench", "--scripted", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "acebench") in err and "--data-dir" in err and "TOOLTUNE_DATA_DIR" in err
    with pytest.raises(runner.DataDirError, match="TOOLTUNE_DATA_DIR"):
        runner.benchmark_data_dir("apibank", tmp_path / "nope")
    (tmp_path / "apibank").mkdir()
    assert runner.benchmark_data_dir("apibank") == tmp_path / "apibank"


def test_docs_list_every_eval_flag_with_its_default(repo_root: Path) -> None:
    """docs/evaluation.md's flag tables follow the dataclasses the flags are generated from."""
    doc = (repo_root / "docs" / "evaluation.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in doc.splitlines() if line.startswith("| `--")}
    for cls in (RunOptions, BackendConfig, Controls, Sampling):
        for key, default, _ in describe(cls):
            if cls is BackendConfig and key == "batch_size":
                continue  # the command's --batch-size (Sampling) sets it
            flag = f"`--{key.replace('_', '-')}`"
            assert flag in rows, f"docs/evaluation.md: no table row for {flag}"
            value = json.loads(default)
            if value not in ("", None):
                shown = json.dumps(value) if isinstance(value, bool) else str(value)
                assert f"`{shown}`" in rows[flag], f"docs/evaluation.md: {flag} default is {shown}"
