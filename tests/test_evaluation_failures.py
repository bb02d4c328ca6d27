"""Entries that fail to generate: scored as missing answers, counted apart, the run going on, resumes that
neither lose nor duplicate an answer (a SIGKILL included), and the limits that stop a run that fails
everything; against a misbehaving server on 127.0.0.1 and a local model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_generation_endpoint import FlakyServer

from tooltune.cli import main
from tooltune.evaluation import runner
from tooltune.evaluation.benchmark import EpisodeContext
from tooltune.evaluation.failures import FailurePolicy, TooManyFailures, failure_line
from tooltune.evaluation.options import EvalOptions
from tooltune.evaluation.runner import Prepared, Task
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import GenerationRequest, HFBackend, OpenAIBackend, Sampling

HERE = Path(__file__).resolve().parent
GREEDY = Sampling(temperature=0, max_new_tokens=8, batch_size=4)


def _task(i: int) -> Task:
    id_ = f"e{i}"
    return Task(id_, "simple", [{"role": "user", "content": id_}],
                lambda text: Verdict(id_, "simple", text == f"answer:{id_}", None if text == f"answer:{id_}"
                                     else "wrong"))


def prepared(n: int) -> Prepared:
    """n single-turn entries e0..e{n-1}, an entry correct when answered ``answer:<its id>``."""
    return Prepared([_task(i) for i in range(n)], [])


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _flaky(failing: str = "e7") -> FlakyServer:
    """About one request in four fails once (each kind in turn); `failing` fails on every attempt."""
    kinds = ["429", "500", "slow", "badjson", "drop"]

    def plan(text: str, attempt: int) -> str:
        if text == failing:
            return "500"
        i = int(text[1:])
        return kinds[(i // 4) % len(kinds)] if attempt == 1 and i % 4 == 1 else "ok"

    return FlakyServer(plan)


def _endpoint(server: FlakyServer, retries: int = 3) -> list[tuple[int, OpenAIBackend]]:
    return [(0, OpenAIBackend(server.url, "m", concurrency=4, retries=retries, backoff=0.01, timeout=1.0))]


def test_one_entry_failing_for_good_leaves_every_other_entry_scored(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: prepared(24))
    out = tmp_path / "run"
    with _flaky() as server:
        summary = runner.evaluate("apibank", _endpoint(server), EvalOptions(
            out=out, sampling=GREEDY, show_progress=False))
    verdicts = {v["id"]: v for v in _lines(out / "verdicts.jsonl")}
    assert len(verdicts) == 24 and all(v["valid"] for i, v in verdicts.items() if i != "e7")
    failed = verdicts["e7"]
    assert not failed["valid"] and failed["generation_failed"] == "http_500"
    assert failed["error"].startswith("generation_failed: request e7:")
    assert "after 4 attempt(s)" in failed["error"]
    assert summary["generation_failures"] == {"entries": 1, "by_kind": {"http_500": 1}, "ids": {"0": ["e7"]}}
    simple = summary["per_seed"]["0"]["categories"]["simple"]
    assert simple == {"accuracy": 23 / 24, "correct": 23, "total": 24}
    completions = [c["id"] for c in _lines(out / "completions_seed0.jsonl")]
    assert len(completions) == 23 and "e7" not in completions  # a predictions file of real answers only
    assert failure_line(summary) == ("generation failed for 1 entry (http_500 1), scored as missing answers: "
                                     "e7")


def test_retry_failed_asks_the_failed_entries_again_and_nothing_else(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: prepared(12))
    out = tmp_path / "run"
    broken = {"e7"}
    server = FlakyServer(lambda text, attempt: "500" if text in broken else "ok")
    with server:
        runner.evaluate("apibank", _endpoint(server, retries=1), EvalOptions(
            out=out, sampling=GREEDY, show_progress=False))
        assert len(server.attempts("e7")) == 2
        runner.evaluate("apibank", _endpoint(server, retries=1), EvalOptions(
            out=out, sampling=GREEDY, show_progress=False, resume=True))
        assert len(server.times) == 13  # resumed: the failed entry is kept, nothing asked
        broken.clear()
        summary = runner.evaluate("apibank", _endpoint(server, retries=1), EvalOptions(
            out=out, sampling=GREEDY, show_progress=False, resume=True,
            failures=FailurePolicy(retry_failed=True)))
        assert len(server.times) == 14 and server.times[-1][0] == "e7"
    verdicts = _lines(out / "verdicts.jsonl")
    assert len(verdicts) == len({v["id"] for v in verdicts}) == 12 and all(v["valid"] for v in verdicts)
    assert summary["generation_failures"]["entries"] == 0
    assert len(_lines(out / "completions_seed0.jsonl")) == 12


def test_a_server_failing_every_request_stops_the_run_without_recording_them(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: prepared(40))
    out = tmp_path / "run"
    broken = [True]
    with FlakyServer(lambda text, attempt: "500" if broken[0] else "ok") as server:
        with pytest.raises(TooManyFailures, match="the last 5 entries in a row failed"):
            runner.evaluate("apibank", _endpoint(server, retries=0), EvalOptions(
                out=out, sampling=GREEDY, show_progress=False, failures=FailurePolicy(max_failed_in_a_row=5)))
        assert len(server.times) < 40 and _lines(out / "verdicts.jsonl") == []
        broken[0] = False  # the cause is fixed: a plain resume asks every entry
        summary = runner.evaluate("apibank", _endpoint(server, retries=0), EvalOptions(
            out=out, sampling=GREEDY, show_progress=False, resume=True))
    assert summary["generation_failures"]["entries"] == 0
    assert sorted(v["id"] for v in _lines(out / "verdicts.jsonl")) == sorted(f"e{i}" for i in range(40))


def test_max_failed_stops_the_run_and_keeps_what_was_answered(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: prepared(12))
    out = tmp_path / "run"
    with FlakyServer(lambda text, attempt: "500" if text in ("e2", "e9") else "ok") as server:
        with pytest.raises(TooManyFailures, match="more than --max-failed 1"):
            runner.evaluate("apibank", _endpoint(server, retries=0), EvalOptions(
                out=out, sampling=Sampling(temperature=0, batch_size=4), show_progress=False,
                failures=FailurePolicy(max_failed=1)))
        verdicts = _lines(out / "verdicts.jsonl")
        assert {v["id"] for v in verdicts if v.get("generation_failed")} == {"e2", "e9"}
        assert all(v["valid"] for v in verdicts if not v.get("generation_failed"))
        summary = runner.evaluate("apibank", _endpoint(server, retries=0), EvalOptions(
            out=out, sampling=Sampling(temperature=0, batch_size=4), show_progress=False, resume=True))
    assert summary["generation_failures"]["ids"] == {"0": ["e2", "e9"]}
    assert len({v["id"] for v in _lines(out / "verdicts.jsonl")}) == len(_lines(out / "verdicts.jsonl")) == 12


@dataclass
class _Entry:
    id: str
    category: str = "multi_turn_base"


def test_a_multi_turn_entry_whose_request_fails_is_failed_and_the_others_are_played(tmp_path,
                                                                                     monkeypatch) -> None:
    def play(entries: list[_Entry], ctx: EpisodeContext) -> None:
        assert ctx.user_backend is not None
        ctx.user_backend.generate([GenerationRequest([{"role": "user", "content": f"user {e.id}"}], id=e.id)
                                   for e in entries])  # the simulated user's turn
        for turn in range(2):  # every entry asks twice; a failed one is not asked again
            texts = ctx.backend.generate([GenerationRequest([{"role": "user", "content": e.id}], id=e.id,
                                                            meta={"turn": turn}) for e in entries])
        for e, t in zip(entries, texts):
            ctx.record(Verdict(e.id, e.category, t == [f"answer:{e.id}"]), [[t[0]]])

    monkeypatch.setattr(runner, "prepare",
                        lambda *a, **k: Prepared([], [], [_Entry(f"e{i}") for i in range(4)], play))
    out = tmp_path / "run"
    with FlakyServer(lambda text, attempt: "500" if text in ("e2", "user e3") else "ok") as server:
        user = OpenAIBackend(server.url, "user", retries=0, timeout=1.0)
        summary = runner.evaluate("bfcl", _endpoint(server, retries=1), EvalOptions(
            out=out, sampling=GREEDY, show_progress=False, user_backend=user))
    assert len(server.attempts("e2")) == 2  # its second turn was not sent
    verdicts = {v["id"]: v for v in _lines(out / "verdicts.jsonl")}
    assert verdicts["e2"]["generation_failed"] == "http_500" and not verdicts["e2"]["valid"]
    assert verdicts["e3"]["generation_failed"] == "http_500"  # its simulated user failed
    assert verdicts["e0"]["valid"] and verdicts["e1"]["valid"]
    assert summary["generation_failures"]["ids"] == {"0": ["e2", "e3"]}


def test_a_local_model_prompt_longer_than_its_context_fails_only_that_entry(tmp_path, monkeypatch,
                                                                            tiny_model_dir) -> None:
    backend = HFBackend(tiny_model_dir, batch_size=4)
    limit = backend.positions()
    tasks = prepared(4).tasks
    tasks[1].messages = [{"role": "user", "content": " ".join(["word"] * (limit + 10))}]
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: Prepared(tasks, []))
    out = tmp_path / "run"
    summary = runner.evaluate("apibank", [(0, backend)], EvalOptions(
        out=out, sampling=GREEDY, show_progress=False))
    verdicts = {v["id"]: v for v in _lines(out / "verdicts.jsonl")}
    assert verdicts["e1"]["generation_failed"] == "too_long" and "context" in verdicts["e1"]["error"]
    assert len(verdicts) == 4 and not any(verdicts[i].get("generation_failed") for i in ("e0", "e2", "e3"))
    assert summary["generation_failures"]["by_kind"] == {"too_long": 1}


_KILLED_RUN = """
import sys
sys.path.insert(0, {tests!r})
from test_evaluation_failures import prepared, GREEDY
from tooltune.evaluation import runner
from tooltune.generation import OpenAIBackend
runner.prepare = lambda *a, **k: prepared(40)
backend = OpenAIBackend({url!r}, "m", concurrency=2, retries=3, backoff=0.01, timeout=1.0)
runner.evaluate("apibank", [(0, backend)], runner.EvalOptions(out={out!r}, sampling=GREEDY,
                                                              show_progress=False, resume={resume}))
"""


def test_sigkill_then_resume_neither_loses_nor_duplicates_an_answer(tmp_path, monkeypatch) -> None:
    out = tmp_path / "run"
    server = _flaky()
    server.delay = 0.05
    with server:
        script = tmp_path / "run.py"
        script.write_text(textwrap.dedent(_KILLED_RUN.format(tests=str(HERE), url=server.url, out=str(out),
                                                             resume=False)))
        proc = subprocess.Popen([sys.executable, str(script)], cwd=HERE.parent)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            path = out / "verdicts.jsonl"
            if path.exists() and len(path.read_text().splitlines()) >= 12:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        kept = _lines(out / "verdicts.jsonl")
        assert 12 <= len(kept) < 40
        monkeypatch.setattr(runner, "prepare", lambda *a, **k: prepared(40))
        backend = OpenAIBackend(server.url, "m", concurrency=2, retries=3, backoff=0.01, timeout=1.0)
        runner.evaluate("apibank", [(0, backend)], EvalOptions(
            out=out, sampling=GREEDY, show_progress=False, resume=True))
    verdicts = _lines(out / "verdicts.jsonl")
    assert len(verdicts) == len({v["id"] for v in verdicts}) == 40
    assert verdicts[: len(kept)] == kept  # what was written before the kill stays as it was
    assert all(v["valid"] for v in verdicts if v["id"] != "e7")
    assert verdicts_of(verdicts, "e7")["generation_failed"] == "http_500"
    answers = [c["id"] for c in _lines(out / "completions_seed0.jsonl")]
    assert len(answers) == len(set(answers)) == 39 and "e7" not in answers


def verdicts_of(records: list[dict], id_: str) -> dict:
    return next(v for v in records if v["id"] == id_)


def test_the_cli_finishes_names_the_failed_entry_and_exits_as_asked(tmp_path, capsys) -> None:
    from tooltune.evaluation.controls import Controls
    from tooltune.evaluation.subset import SubsetSpec

    prep, _ = runner.prepare_subset("bfcl", "simple_python", Controls(), subset=SubsetSpec(6))
    bad = prep.tasks[2]
    text = bad.messages[-1]["content"]
    common = ["eval", "bfcl", "--model-name", "m", "--categories", "simple_python", "--subset", "6",
              "--seeds", "1", "--temperature", "0", "--retries", "1", "--no-report"]
    with FlakyServer(lambda t, attempt: "500" if t == text else "ok") as server:
        assert main([*common, "--endpoint", server.url, "--out", str(tmp_path / "a")]) == 0
        err = capsys.readouterr().err
        assert f"generation failed for 1 entry (http_500 1), scored as missing answers: {bad.id}" in err
        summary = json.loads((tmp_path / "a" / "summary.json").read_text())
        assert summary["generation_failures"]["ids"] == {"0": [bad.id]}
        stop = ["--max-failed", "0"]
        assert main([*common, "--endpoint", server.url, "--out", str(tmp_path / "b"), *stop]) == 3
        assert "more than --max-failed 0" in capsys.readouterr().err
        assert main([*common, "--endpoint", server.url, "--out", str(tmp_path / "b"), "--retry-failed"]) == 2
