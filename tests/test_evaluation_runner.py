"""Generation through the CLI (a local tiny HF model over seeds, an OpenAI-compatible endpoint), the one set
of protocol defaults shared by the library and the CLI, where benchmark data is read from, and run
folders: one run per folder, one writer at a time, resumes that survive a kill."""

from __future__ import annotations

import json
import os
import shutil
import signal
from dataclasses import asdict
from pathlib import Path

import pytest
from test_generation_backends import _FakeServer
from test_rundir import lock_holder

from tooltune.cli import build_parser, main
from tooltune.config import describe
from tooltune.evaluation import commands as eval_commands
from tooltune.evaluation import runner
from tooltune.evaluation.benchmark import BENCHMARKS
from tooltune.evaluation.bfcl.benchmark import BfclControls
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.failures import FailurePolicy
from tooltune.evaluation.options import EvalOptions, RunOptions
from tooltune.evaluation.runner import Prepared, Task
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import BackendConfig, ReplayBackend, Sampling, ScriptedBackend
from tooltune.generation.backends import load_predictions
from tooltune.rundir import RunMismatch


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
                   "--data-dir", str(shared_data_dir / "apibank"), "--scoring", "corrected"])
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
    opts, controls, sampling, backend = eval_commands._configs(args, BENCHMARKS["bfcl"])
    assert (opts, controls, sampling) == (RunOptions(out=str(tmp_path)), BfclControls(), Sampling())
    assert backend == BackendConfig(batch_size=Sampling().batch_size)

    task = Task("t0", "simple", [{"role": "user", "content": "q"}], lambda _: Verdict("t0", "simple", True))
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: Prepared([task], []))
    seen = []
    backend = ScriptedBackend(lambda r: seen.append((r.seed, r.temperature)) or "x")
    runner.evaluate("apibank", backend, EvalOptions(out=tmp_path / "lib", show_progress=False))
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
    for cls in (RunOptions, BackendConfig, Controls, BfclControls, Sampling, FailurePolicy):
        for key, default, _ in describe(cls):
            if cls is BackendConfig and key == "batch_size":
                continue  # the command's --batch-size (Sampling) sets it
            flag = f"`--{key.replace('_', '-')}`"
            assert flag in rows, f"docs/evaluation.md: no table row for {flag}"
            value = json.loads(default)
            if value not in ("", None):
                shown = json.dumps(value) if isinstance(value, bool) else str(value)
                assert f"`{shown}`" in rows[flag], f"docs/evaluation.md: {flag} default is {shown}"


# --------------------------------------------------------------------------------------------
# Run folders


@pytest.fixture(scope="module")
def gold_predictions(tmp_path_factory, shared_data_dir) -> Path:
    """API-Bank level-1's ground truth as a predictions file (the scripted run's completions, 399 lines)."""
    out = tmp_path_factory.mktemp("gold")
    assert main(["eval", "apibank", "--scripted", "--categories", "level-1", "--data-dir",
                 str(shared_data_dir / "apibank"), "--out", str(out), "--no-report"]) == 0
    return out / "completions_seed0.jsonl"


def _apibank(out: Path, predictions: Path, data: Path, *extra: str) -> int:
    # the corrected rules score every ground truth right (official ones fail some: test_evaluation_apibank)
    return main(["eval", "apibank", "--predictions", str(predictions), "--categories", "level-1",
                 "--data-dir", str(data / "apibank"), "--out", str(out), "--no-report",
                 "--scoring", "corrected", *extra])


def _files(out: Path) -> dict[str, bytes]:
    """Every file of a run folder but the lock, with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name != ".lock"}


def _one_line_error(capsys: pytest.CaptureFixture, command: str) -> str:
    """The one error line printed since the last call (progress bars of earlier runs aside)."""
    err = capsys.readouterr().err.replace("\r", "\n").splitlines()
    lines = [x for x in err if x.startswith("tooltune eval")]
    assert len(lines) == 1 and lines[0].startswith(f"tooltune eval {command}: ") and err[-1] == lines[0], err
    return lines[0]


def test_resume_refuses_another_run_naming_each_difference(tmp_path, shared_data_dir, gold_predictions,
                                                           capsys) -> None:
    """Another template, parse mode, temperature, benchmark or predictions content is not resumed into the
    folder: exit 2 naming every differing field with both values; verdicts, summary and manifest stay."""
    preds = tmp_path / "preds.jsonl"
    shutil.copy(gold_predictions, preds)
    out = tmp_path / "run"
    assert _apibank(out, preds, shared_data_dir) == 0
    before = _files(out)
    capsys.readouterr()
    for extra, parts in [
        (["--template", "r2if"], ['template: "tool_n1" vs "r2if"', "system_prompt_sha256: "]),
        (["--mode", "substring"], ['mode: "strict" vs "substring"', "1 difference,"]),
        (["--template", "r2if", "--mode", "substring", "--temperature", "0"],
         ['template: "tool_n1" vs "r2if"', 'mode: "strict" vs "substring"', "temperature: 0.7 vs 0.0",
          "4 differences"]),
    ]:
        assert _apibank(out, preds, shared_data_dir, "--resume", *extra) == 2
        err = _one_line_error(capsys, "apibank")
        assert str(out) in err and "settings it started with" in err
        assert all(part in err for part in parts), (parts, err)
        assert _files(out) == before
    assert main(["eval", "bfcl", "--predictions", str(preds), "--categories", "simple_python", "--out",
                 str(out), "--resume", "--no-report"]) == 2
    err = _one_line_error(capsys, "bfcl")
    assert 'benchmark: "apibank" vs "bfcl"' in err  # the folder is refused before bfcl's entries are read
    preds.write_text("".join(preds.read_text().splitlines(keepends=True)[:-1]))  # same file, other content
    assert _apibank(out, preds, shared_data_dir, "--resume") == 2
    err = _one_line_error(capsys, "apibank")
    assert "predictions_sha256.0: " in err and "1 difference," in err
    assert _files(out) == before
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["per_seed"]["0"]["categories"]) == {"level-1"}
    assert json.loads(before["run.json"])["benchmark"] == "apibank"


def test_a_new_run_needs_a_new_or_empty_folder(tmp_path, shared_data_dir, gold_predictions, capsys) -> None:
    """Without --resume a folder holding results is never overwritten: another run's folder is refused
    (another benchmark included), this run's folder asks for --resume; an empty folder is fine."""
    out = tmp_path / "run"
    assert _apibank(out, gold_predictions, shared_data_dir) == 0
    before = _files(out)
    capsys.readouterr()
    assert main(["eval", "bfcl", "--scripted", "--categories", "simple_python", "--out", str(out),
                 "--no-report"]) == 2
    err = _one_line_error(capsys, "bfcl")
    assert "holds another run" in err and 'benchmark: "apibank" vs "bfcl"' in err
    assert "another output folder" in err
    assert _apibank(out, gold_predictions, shared_data_dir, "--categories", "level-2") == 2
    assert 'categories: ["level-1"] vs ["level-2"]' in _one_line_error(capsys, "apibank")
    assert _apibank(out, gold_predictions, shared_data_dir) == 2
    assert "already holds this run's results: pass --resume" in _one_line_error(capsys, "apibank")
    assert _files(out) == before
    assert _apibank(out, gold_predictions, shared_data_dir, "--resume") == 0  # nothing left to do
    assert _files(out)["verdicts.jsonl"] == before["verdicts.jsonl"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _apibank(empty, gold_predictions, shared_data_dir) == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert _apibank(mine, gold_predictions, shared_data_dir) == 2
    assert "has no run.json" in _one_line_error(capsys, "apibank")
    assert _files(mine) == {"notes.txt": b"keep me"}


def test_one_writer_per_folder_and_a_killed_writer_frees_it(tmp_path, shared_data_dir, gold_predictions,
                                                            capsys) -> None:
    """While another process holds the folder, eval exits 2 naming the folder and the holder, whatever it
    asks for; once that process is killed (no clean exit), --resume runs."""
    out = tmp_path / "run"
    assert _apibank(out, gold_predictions, shared_data_dir) == 0
    before = _files(out)
    capsys.readouterr()
    with lock_holder(out) as proc:
        for extra in (["--resume"], ["--categories", "level-2"]):
            assert _apibank(out, gold_predictions, shared_data_dir, *extra) == 2
            err = _one_line_error(capsys, "apibank")
            assert str(out) in err and "in use by another run" in err and f"pid {proc.pid}" in err
        assert _files(out) == before
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert _apibank(out, gold_predictions, shared_data_dir, "--resume") == 0
    assert len(_lines(out / "verdicts.jsonl")) == 399


def test_a_killed_run_resumes_without_gluing_onto_torn_lines(tmp_path, shared_data_dir,
                                                             gold_predictions) -> None:
    """--resume after a kill mid-write cuts the torn last lines of completions and verdicts, then
    finishes every entry once: the completions stay a replayable predictions file."""
    out = tmp_path / "run"
    assert _apibank(out, gold_predictions, shared_data_dir) == 0
    verdicts = (out / "verdicts.jsonl").read_text().splitlines(keepends=True)
    completions = (out / "completions_seed0.jsonl").read_text().splitlines(keepends=True)
    assert len(verdicts) == len(completions) == 399
    # killed in the middle of writes: completion 101 and verdict 100 are torn
    (out / "completions_seed0.jsonl").write_text("".join(completions[:100]) + completions[100][:25])
    (out / "verdicts.jsonl").write_text("".join(verdicts[:99]) + verdicts[99][:20])
    assert _apibank(out, gold_predictions, shared_data_dir, "--resume") == 0
    lines = (out / "completions_seed0.jsonl").read_text().splitlines()
    assert all(json.loads(x)["id"] for x in lines)  # nothing glued onto the torn line
    assert load_predictions(out / "completions_seed0.jsonl") == load_predictions(gold_predictions)
    again = _lines(out / "verdicts.jsonl")
    assert len(again) == 399 and len({(v["seed"], v["id"]) for v in again}) == 399
    assert {v["id"]: v["valid"] for v in again} == {v["id"]: v["valid"] for v in map(json.loads, verdicts)}
    level1 = json.loads((out / "summary.json").read_text())["per_seed"]["0"]["categories"]["level-1"]
    assert level1["total"] == 399 and level1["accuracy"] == 1.0


def test_a_completion_whose_verdict_a_kill_lost_is_written_once_on_resume(tmp_path, shared_data_dir,
                                                                          gold_predictions) -> None:
    """The completion is written before its verdict: a kill between the two leaves a completion that
    the resumed run generates again; the file keeps one line per entry (a predictions file)."""
    out = tmp_path / "run"
    assert _apibank(out, gold_predictions, shared_data_dir) == 0
    verdicts = (out / "verdicts.jsonl").read_text().splitlines(keepends=True)
    (out / "verdicts.jsonl").write_text("".join(verdicts[:250]))  # completions 251..399 kept, verdicts lost
    assert _apibank(out, gold_predictions, shared_data_dir, "--resume") == 0
    ids = [json.loads(x)["id"] for x in (out / "completions_seed0.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 399
    assert len(_lines(out / "verdicts.jsonl")) == 399


def test_a_hostile_predictions_line_fails_only_its_entry_naming_the_line(tmp_path, shared_data_dir,
                                                                         gold_predictions) -> None:
    lines = gold_predictions.read_text().splitlines()
    ids = [json.loads(x)["id"] for x in lines]
    lines[4] = '{"id": ' + json.dumps(ids[4]) + ', "result": ' + "[" * 200_000 + "]" * 200_000 + "}"
    lines[5] = '{"id": ' + json.dumps(ids[5]) + ', "result": ' + "9" * 5000 + "}"
    lines += [json.dumps({"id": unknown, "result": "x"}) for unknown in ("no_such_entry", "nor_this")]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    assert _apibank(out, preds, shared_data_dir) == 0
    verdicts = {v["id"]: v for v in _lines(out / "verdicts.jsonl")}
    assert verdicts[ids[4]]["error"].startswith(f"unreadable_prediction: {preds}:5: nested too deeply")
    assert verdicts[ids[5]]["error"].startswith(f"unreadable_prediction: {preds}:6: not valid JSON")
    assert len(verdicts) == len(ids) and sum(v["valid"] for v in verdicts.values()) == len(ids) - 2
    report = json.loads((out / "summary.json").read_text())["predictions"]["0"]
    assert report["unknown_ids"] == 2 and set(report["unknown_examples"]) == {"no_such_entry", "nor_this"}
    assert report["unreadable"] == 2 and report["missing"] == 0 and report["ids"] == len(ids) + 2


def test_duplicated_prediction_ids_are_refused_unless_told_which_wins(tmp_path, shared_data_dir,
                                                                      gold_predictions, capsys) -> None:
    lines = gold_predictions.read_text().splitlines()
    first = json.loads(lines[0])["id"]
    lines.append(json.dumps({"id": first, "result": "no call here"}))
    preds = tmp_path / "preds.jsonl"
    preds.write_text("\n".join(lines) + "\n")
    out = tmp_path / "new" / "run"
    capsys.readouterr()
    assert _apibank(out, preds, shared_data_dir) == 2
    err = _one_line_error(capsys, "apibank")
    assert f"id {first!r} on lines 1, {len(lines)}" in err and "--prediction-duplicates" in err
    assert not (tmp_path / "new").exists()  # the failed run removed the folders it created
    assert _apibank(out, preds, shared_data_dir, "--prediction-duplicates", "last") == 0
    verdicts = {v["id"]: v for v in _lines(out / "verdicts.jsonl")}
    assert not verdicts[first]["valid"] and sum(v["valid"] for v in verdicts.values()) == len(verdicts) - 1
    assert json.loads((out / "summary.json").read_text())["predictions"]["0"]["duplicated_ids"] == 1


def test_another_benchmarks_folder_is_refused_before_its_data_folder(tmp_path, shared_data_dir,
                                                                     gold_predictions, capsys,
                                                                     monkeypatch) -> None:
    out = tmp_path / "run"
    assert _apibank(out, gold_predictions, shared_data_dir) == 0
    before = _files(out)
    capsys.readouterr()
    monkeypatch.delenv("TOOLTUNE_DATA_DIR", raising=False)  # acebench would also lack its data folder
    assert main(["eval", "acebench", "--scripted", "--out", str(out), "--no-report"]) == 2
    err = _one_line_error(capsys, "acebench")
    assert 'benchmark: "apibank" vs "acebench"' in err and "TOOLTUNE_DATA_DIR" not in err
    assert _files(out) == before


def test_a_failed_evaluation_removes_only_the_folder_it_created(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("TOOLTUNE_DATA_DIR", raising=False)  # the run fails: no data folder
    new = tmp_path / "new" / "deeper" / "run"
    assert main(["eval", "apibank", "--scripted", "--out", str(new)]) == 2
    assert "--data-dir" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    assert main(["eval", "apibank", "--scripted", "--out", str(existing)]) == 2
    assert existing.is_dir()


def test_resume_counts_each_entry_once(tmp_path, shared_data_dir, gold_predictions) -> None:
    """A verdicts file holding every entry twice (two writers without a lock) counts each once."""
    out = tmp_path / "run"
    assert _apibank(out, gold_predictions, shared_data_dir) == 0
    path = out / "verdicts.jsonl"
    path.write_text(path.read_text() * 2)
    assert _apibank(out, gold_predictions, shared_data_dir, "--resume") == 0
    assert len(_lines(path)) == 399
    summary = json.loads((out / "summary.json").read_text())
    assert summary["per_seed"]["0"]["categories"]["level-1"]["total"] == 399


def test_library_evaluate_resumes_only_the_same_run(tmp_path, monkeypatch) -> None:
    task = Task("t0", "simple", [{"role": "user", "content": "q"}], lambda _: Verdict("t0", "simple", True))
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: Prepared([task], []))
    out = tmp_path / "lib"
    replay = [(0, ReplayBackend({"t0": "a"}))]
    runner.evaluate("apibank", replay, EvalOptions(out=out, show_progress=False))
    manifest = (out / "manifest.json").read_text()
    assert json.loads(manifest)["predictions_sha256"] == {"0": runner.predictions_sha256(replay[0][1])}
    assert runner.evaluate("apibank", replay, EvalOptions(
        out=out, show_progress=False, resume=True))["seeds"] == [0]
    with pytest.raises(RunMismatch, match="predictions_sha256.0"):
        runner.evaluate("apibank", [(0, ReplayBackend({"t0": "b"}))], EvalOptions(
            out=out, show_progress=False, resume=True))
    with pytest.raises(RunMismatch, match="pass --resume"):
        runner.evaluate("apibank", replay, EvalOptions(out=out, show_progress=False))
    assert (out / "manifest.json").read_text() == manifest


def test_a_folder_recording_the_retired_name_style_still_resumes(tmp_path, monkeypatch) -> None:
    # run folders of API-Bank, ACEBench and MCP made before name_style became BFCL's own control
    task = Task("t0", "simple", [{"role": "user", "content": "q"}], lambda _: Verdict("t0", "simple", True))
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: Prepared([task], []))
    out, replay = tmp_path / "old", [(0, ReplayBackend({"t0": "a"}))]
    runner.evaluate("apibank", replay, EvalOptions(out=out, show_progress=False))
    stored = json.loads((out / "run.json").read_text())
    assert "name_style" not in stored
    (out / "run.json").write_text(json.dumps({**stored, "name_style": "dotted"}))
    resumed = runner.evaluate("apibank", replay, EvalOptions(out=out, show_progress=False, resume=True))
    assert resumed["seeds"] == [0]


def test_a_chat_template_that_drops_earlier_reasoning_is_refused_where_history_exists(
    shared_data_dir, tiny_model_dir
) -> None:
    from test_prompts import QWEN3_LIKE

    from tooltune.evaluation.controls import Controls
    from tooltune.evaluation.runner import _check_reasoning_history, prepare
    from tooltune.generation import HFBackend
    from tooltune.prompts.chat_template import ReasoningHistoryLost

    backend = HFBackend(tiny_model_dir)
    backend.tokenizer.chat_template = QWEN3_LIKE
    data = shared_data_dir / "acebench"
    history = prepare("acebench", "normal_multi_turn_user_adjust", Controls(), data)
    with pytest.raises(ReasoningHistoryLost, match="controls.keep_reasoning"):
        _check_reasoning_history(history, [(0, backend)], Controls())
    _check_reasoning_history(history, [(0, backend)], Controls(keep_reasoning=False))
    _check_reasoning_history(history, [(0, backend)], Controls(history="context"))
    single = prepare("acebench", "normal_single_turn_single_function", Controls(), data)
    _check_reasoning_history(single, [(0, backend)], Controls())  # no earlier turn: nothing to lose


def test_native_template_sends_each_entry_its_tools_and_refuses_a_template_without(
    tmp_path, shared_data_dir, tiny_model_dir
) -> None:
    from test_prompts_native import OLD_TEMPLATE

    from tooltune.evaluation import acebench as A
    from tooltune.generation import HFBackend
    from tooltune.prompts import ChatToolsUnsupported, chat_tools, resolve_native

    seen: list = []
    controls = Controls(template="native")
    runner.evaluate("apibank", [(0, ScriptedBackend(lambda r: seen.append(r) or ""))], EvalOptions(
        out=tmp_path / "run", controls=controls, categories="level-1", data_dir=shared_data_dir / "apibank",
        show_progress=False))
    served = runner.with_model_template([], controls)  # no local model: as an endpoint writes calls
    prep = runner.prepare("apibank", "level-1", served, shared_data_dir / "apibank")
    assert len(seen) == len(prep.tasks) and all(t.tools for t in prep.tasks)
    assert [r.tools for r in seen] == [t.tools for t in prep.tasks]
    entry = A.load_agent_entries(shared_data_dir / "acebench", ["agent_multi_step"])[0]
    run = A.AgentRun(entry, A.AgentConfig(template=resolve_native(None, "native")))
    assert run.agent_request().tools == chat_tools(entry.tools) and entry.tools
    backend = HFBackend(tiny_model_dir)
    held = runner.with_model_template([(0, backend)], controls)  # the tiny template lists the tools
    assert held.prompt_template.grammar.name == "hermes" and held.template == "native"
    assert runner.with_model_template([(0, backend)], Controls()).prompt_template.name == "tool_n1"
    backend.tokenizer.chat_template = OLD_TEMPLATE
    with pytest.raises(ChatToolsUnsupported, match="controls.template: 'native'"):
        runner.evaluate("apibank", [(0, backend)], EvalOptions(
            out=tmp_path / "refused", controls=controls, categories="level-1",
            data_dir=shared_data_dir / "apibank", show_progress=False))
    runner.with_model_template([(0, backend)], Controls())  # other templates: nothing to check


# --------------------------------------------------------------------------------------------
# Subsets


def test_a_subset_run_records_its_entries_and_resumes_only_the_same_subset(tmp_path, shared_data_dir,
                                                                          gold_predictions, capsys) -> None:
    """--subset N --subset-seed S scores N entries per category; the manifest, run.json, summary, report
    and the printed result state the subset; another seed is another run."""
    out = tmp_path / "run"
    capsys.readouterr()
    assert _apibank(out, gold_predictions, shared_data_dir, "--subset", "25", "--subset-seed", "3") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["entries"] == ("subset: at most 25 per category, seed 3; 25 units, 25 entries "
                                  "(level-1 25/399)")
    assert printed["standard_errors"]["level-1"] == 0.0 and printed["level-1"] == 1.0
    verdicts = _lines(out / "verdicts.jsonl")
    assert len(verdicts) == 25
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["subset_identity"] == {"per_category": 25, "seed": 3}
    assert manifest["subset"]["categories"] == {"level-1": {"units": 25, "available": 399, "entries": 25}}
    assert json.loads((out / "run.json").read_text())["subset"] == {"per_category": 25, "seed": 3}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["subset"]["entries"] == 25 and summary["standard_errors"]["overall"] == 0.0
    again = tmp_path / "again"  # the same subset is the same entries
    assert _apibank(again, gold_predictions, shared_data_dir, "--subset", "25", "--subset-seed", "3",
                    "--no-report") == 0
    assert {v["id"] for v in _lines(again / "verdicts.jsonl")} == {v["id"] for v in verdicts}
    capsys.readouterr()
    assert _apibank(out, gold_predictions, shared_data_dir, "--subset", "25", "--subset-seed", "4",
                    "--resume") == 2
    assert "subset.seed: 3 vs 4" in _one_line_error(capsys, "apibank")
    assert _apibank(out, gold_predictions, shared_data_dir, "--resume") == 2  # the whole set is another run
    assert "subset" in _one_line_error(capsys, "apibank")
    assert _apibank(out, gold_predictions, shared_data_dir, "--subset", "25", "--subset-seed", "3",
                    "--resume") == 0


def test_an_id_list_subset_and_its_refusals(tmp_path, shared_data_dir, gold_predictions, capsys) -> None:
    ids = tmp_path / "ids.txt"
    chosen = [v["id"] for v in _lines(gold_predictions)][5:9]
    ids.write_text("\n".join(chosen) + "\n")
    out = tmp_path / "run"
    assert _apibank(out, gold_predictions, shared_data_dir, "--subset-ids", str(ids)) == 0
    assert sorted(v["id"] for v in _lines(out / "verdicts.jsonl")) == sorted(chosen)
    identity = json.loads((out / "run.json").read_text())["subset"]
    assert set(identity) == {"ids_sha256"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["subset"]["ids_file"] == "ids.txt" and summary["subset"]["entries"] == 4
    capsys.readouterr()
    ids.write_text(chosen[0] + "\nlevel-1-no-such-entry\n")
    assert _apibank(tmp_path / "bad", gold_predictions, shared_data_dir, "--subset-ids", str(ids)) == 2
    err = _one_line_error(capsys, "apibank")
    assert "subset_ids" in err and "level-1-no-such-entry" in err and "1 id(s)" in err
    assert not (tmp_path / "bad").exists()
    assert _apibank(tmp_path / "both", gold_predictions, shared_data_dir, "--subset", "3", "--subset-ids",
                    str(ids)) == 2
    assert "not both" in _one_line_error(capsys, "apibank")


def test_bfcl_subset_scores_go_through_the_official_checker_and_its_formulas(tmp_path) -> None:
    out = tmp_path / "bfcl"
    non_live = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
                "parallel_multiple")
    assert main(["eval", "bfcl", "--scripted", "--categories", ",".join(non_live), "--subset", "3",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    cats = summary["per_seed"]["0"]["categories"]
    assert {c: v["total"] for c, v in cats.items()} == dict.fromkeys(non_live, 3)
    acc = {c: v["accuracy"] for c, v in cats.items()}
    simple = (acc["simple_python"] + acc["simple_java"] + acc["simple_javascript"]) / 3
    expected = (simple + acc["multiple"] + acc["parallel"] + acc["parallel_multiple"]) / 4
    assert summary["scores"]["table2.non_live.overall"] == pytest.approx(expected)
    assert "table2.non_live.overall" in summary["standard_errors"]
    assert "Entries: subset: at most 3 per category, seed 0; 18 units" in (out / "report.md").read_text()


@pytest.fixture(scope="module")
def varied_model_dir(tiny_model_dir: Path, tmp_path_factory) -> Path:
    """The tiny model with larger random weights: it writes varied text (the default one only newlines)."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    out = tmp_path_factory.mktemp("varied")
    shutil.copytree(tiny_model_dir, out, dirs_exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(out)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    model.save_pretrained(out)
    return out


@pytest.mark.parametrize(("benchmark", "categories"), [("bfcl", "simple_python,irrelevance,live_relevance"),
                                                        ("apibank", "level-1")])
def test_stopping_decided_completions_changes_no_verdict(tmp_path, request, varied_model_dir,
                                                         benchmark: str, categories: str) -> None:
    """--stop-decided (the default) ends a completion once no continuation can pass the strict format:
    every verdict equals the full-length run's (BFCL irrelevance counts a failed format as "no call"),
    each recorded completion is the start of the full one, and the manifest records the setting."""
    data = [] if benchmark == "bfcl" else ["--data-dir",
                                           str(request.getfixturevalue("shared_data_dir") / benchmark)]
    runs = {}
    for stop in ("false", "true"):
        out = tmp_path / f"{benchmark}_{stop}"
        assert main(["eval", benchmark, "--model", str(varied_model_dir), "--categories", categories, *data,
                     "--subset", "2", "--seeds", "1", "--temperature", "0", "--max-new-tokens", "24",
                     "--stop-decided", stop, "--out", str(out), "--no-report"]) == 0
        assert json.loads((out / "manifest.json").read_text())["stop_decided"] is (stop == "true")
        runs[stop] = ({v["id"]: v["valid"] for v in _lines(out / "verdicts.jsonl")},
                      {c["id"]: c["result"] for c in _lines(out / "completions_seed0.jsonl")})
    (full, full_text), (stopped, stopped_text) = runs["false"], runs["true"]
    assert stopped == full and len(full) >= 2
    assert all(full_text[i].startswith(t) for i, t in stopped_text.items())
    assert sum(len(t) for t in stopped_text.values()) < sum(len(t) for t in full_text.values())
