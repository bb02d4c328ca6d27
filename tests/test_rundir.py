"""Run folders: one writer (an flock released when the holder dies), one run (run.json), torn JSONL tails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tooltune.rundir import (
    LOCK_NAME,
    RunFolderBusy,
    RunLock,
    RunMismatch,
    check_identity,
    drop_torn_tail,
    read_identity,
    write_identity,
)

HOLDER = """
import sys, time
from tooltune.rundir import RunLock
with RunLock(sys.argv[1], command="holder --out " + sys.argv[1]):
    print("locked", flush=True)
    time.sleep(600)
"""


@contextmanager
def lock_holder(folder: Path) -> Iterator[subprocess.Popen]:
    """Another process holding `folder`'s RunLock until the block ends or the test kills it."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_second_process_is_refused_naming_the_holder_until_the_holder_is_killed(tmp_path) -> None:
    folder = tmp_path / "run"
    with lock_holder(folder) as proc:
        with pytest.raises(RunFolderBusy) as err:
            RunLock(folder).acquire()
        msg = str(err.value)
        assert str(folder) in msg and f"pid {proc.pid}" in msg and f"holder --out {folder}" in msg
        os.kill(proc.pid, signal.SIGKILL)  # no clean exit: the OS drops the flock
        proc.wait(timeout=30)
        with RunLock(folder):
            info = json.loads((folder / LOCK_NAME).read_text())
            assert info["pid"] == os.getpid()
    assert (folder / LOCK_NAME).read_text() == ""  # a clean release leaves the lock file empty


def test_the_lock_nests_in_one_thread_and_refuses_another_thread(tmp_path) -> None:
    errors: list[BaseException] = []

    def other() -> None:
        try:
            RunLock(tmp_path).acquire()
        except RunFolderBusy as e:
            errors.append(e)

    with RunLock(tmp_path):
        with RunLock(tmp_path / "."):  # the same folder, spelled differently
            pass
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1 and "another thread" in str(errors[0])
        with lock_holder(tmp_path / "other"):  # other folders are independent
            pass
    with lock_holder(tmp_path):  # released after the outer block, not the inner one
        pass


FIELDS = {"command": "eval", "benchmark": "apibank", "template": "tool_n1", "seeds": [0, 1],
          "data_sha256": {"a.json": "1" * 8, "b.json": "2" * 8}}


def test_identity_of_a_new_an_empty_and_the_same_run(tmp_path) -> None:
    assert check_identity(tmp_path / "missing", FIELDS, resume=False) is False
    assert check_identity(tmp_path, FIELDS, resume=True) is False  # empty: nothing to resume
    (tmp_path / LOCK_NAME).write_text("")
    write_identity(tmp_path, {**FIELDS, "template": "r2if"})
    assert check_identity(tmp_path, FIELDS, resume=False) is False  # run.json alone: no results yet
    write_identity(tmp_path, FIELDS)
    assert read_identity(tmp_path) == json.loads(json.dumps(FIELDS))
    (tmp_path / "verdicts.jsonl").write_text("")
    assert check_identity(tmp_path, {**FIELDS, "seeds": (0, 1)}, resume=True) is True  # as read from JSON
    with pytest.raises(RunMismatch, match="already holds this run's results: pass --resume"):
        check_identity(tmp_path, FIELDS, resume=False)


@pytest.mark.parametrize("resume", [True, False])
def test_another_run_is_refused_naming_every_difference_with_both_values(tmp_path, resume) -> None:
    write_identity(tmp_path, FIELDS)
    (tmp_path / "summary.json").write_text("{}")
    other = {"command": "eval", "benchmark": "bfcl", "template": "tool_n1", "seeds": [0],
             "data_sha256": {"a.json": "1" * 8, "c.json": "3" * 8}, "mode": "substring"}
    with pytest.raises(RunMismatch) as err:
        check_identity(tmp_path, other, resume=resume)
    msg = str(err.value)
    for part in ('benchmark: "apibank" vs "bfcl"', "seeds: [0, 1] vs [0]",
                 'data_sha256.b.json: "22222222" vs missing', 'data_sha256.c.json: missing vs "33333333"',
                 'mode: missing vs "substring"', "5 differences", str(tmp_path)):
        assert part in msg, (part, msg)
    assert "template" not in msg and "\n" not in msg
    assert ("settings it started with" in msg) is resume and "another output folder" in msg


def test_a_folder_with_files_but_no_readable_run_json_is_refused(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RunMismatch, match=r"not empty \(notes.txt\) and has no run.json"):
        check_identity(tmp_path, FIELDS, resume=True)
    (tmp_path / "run.json").write_text('{"torn')
    with pytest.raises(RunMismatch, match="run.json cannot be read"):
        check_identity(tmp_path, FIELDS, resume=True)


@pytest.mark.parametrize(("content", "expected", "changed"), [
    (b'{"id": "a"}\n{"id": "b", "res', b'{"id": "a"}\n', True),  # cut in the middle of a record
    (b'{"id": "a"}\n{"id": "b"}', b'{"id": "a"}\n{"id": "b"}\n', True),  # complete but for the newline
    (b'{"id": "a"}\n{"id": "b"}\n', b'{"id": "a"}\n{"id": "b"}\n', False),
    (b'{"id": "a"}\n\x00\x00\n', b'{"id": "a"}\n', True),  # a last line that is not JSON
    (b'{"id": "a", "r', b"", True),  # the only line is torn
    (b"", b"", False),
])
def test_drop_torn_tail(tmp_path, content, expected, changed) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(content)
    assert drop_torn_tail(path) is changed
    assert path.read_bytes() == expected
    assert drop_torn_tail(tmp_path / "missing.jsonl") is False


def test_drop_torn_tail_finds_the_line_start_in_a_long_line(tmp_path) -> None:
    path = tmp_path / "f.jsonl"
    first = json.dumps({"id": "a", "result": "x" * 200_000}) + "\n"
    path.write_text(first + json.dumps({"id": "b", "result": "y" * 150_000})[:-3])
    assert drop_torn_tail(path) and path.read_text() == first
