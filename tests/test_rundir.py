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
    check_inputs,
    content_digest,
    drop_torn_tail,
    read_identity,
    removed_on_failure,
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


def test_a_setting_added_since_the_run_counts_only_when_it_leaves_its_default(tmp_path) -> None:
    write_identity(tmp_path, FIELDS)
    (tmp_path / "summary.json").write_text("{}")
    defaults = {"mode": "strict", "data_sha256": {"new.json": "0"}}
    # `mode` did not exist when the run was made: at its default the run is the same one
    assert check_identity(tmp_path, {**FIELDS, "mode": "strict"}, resume=True, defaults=defaults) is True
    assert check_identity(tmp_path, {**FIELDS, "data_sha256": {**FIELDS["data_sha256"], "new.json": "0"}},
                          resume=True, defaults=defaults) is True
    with pytest.raises(RunMismatch, match='mode: missing vs "substring"'):
        check_identity(tmp_path, {**FIELDS, "mode": "substring"}, resume=True, defaults=defaults)
    with pytest.raises(RunMismatch, match='mode: missing vs "strict"'):  # no defaults given: a difference
        check_identity(tmp_path, {**FIELDS, "mode": "strict"}, resume=True)
    with pytest.raises(RunMismatch, match='benchmark: "apibank" vs missing'):
        check_identity(tmp_path, {k: v for k, v in FIELDS.items() if k != "benchmark"}, resume=True,
                       defaults={"benchmark": "apibank"})  # a setting the run had and this one lacks


def test_a_setting_no_longer_recorded_counts_only_when_it_left_its_old_value(tmp_path) -> None:
    write_identity(tmp_path, {**FIELDS, "name_style": "dotted"})
    (tmp_path / "summary.json").write_text("{}")
    retired = {"name_style": "dotted"}
    assert check_identity(tmp_path, FIELDS, resume=True, retired=retired) is True
    with pytest.raises(RunMismatch, match='name_style: "dotted" vs missing'):  # not declared retired
        check_identity(tmp_path, FIELDS, resume=True)
    write_identity(tmp_path, {**FIELDS, "name_style": "underscore"})
    with pytest.raises(RunMismatch, match='name_style: "underscore" vs missing'):  # made at another value
        check_identity(tmp_path, FIELDS, resume=True, retired=retired)


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


# --- inputs by content, the quick first check, what a failed command created -----------------------


def test_content_digest_of_files_and_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tooltune import rundir

    a = tmp_path / "a.jsonl"
    a.write_text("one\n")
    first = content_digest(a)
    assert first.startswith("sha256:") and content_digest(a) == first
    a.write_text("two\n")
    assert content_digest(a) != first
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / ".cache").mkdir()
    (model / ".cache" / "x").write_text("ignored")
    folder = content_digest(model)
    (model / ".cache" / "x").write_text("still ignored")
    assert content_digest(model) == folder
    (model / "sub").mkdir()
    (model / "sub" / "w.bin").write_bytes(b"\0" * 10)
    assert content_digest(model) != folder
    monkeypatch.setattr(rundir.identity, "FULL_DIGEST_BYTES", 4)  # larger files: digested from pieces
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(range(256)) * 4000)
    sampled = content_digest(big)
    assert sampled.startswith("sampled-sha256:")
    big.write_bytes(bytes(range(256)) * 3999 + bytes(256))  # the last piece changed
    assert content_digest(big) != sampled


def test_check_inputs_names_each_changed_input_and_its_file(tmp_path: Path) -> None:
    write_identity(tmp_path, {"command": "x", "inputs": {"data.train": "sha256:aaa", "model": "hub:m"}})
    # a run that stopped before writing results (a data error) protects nothing: another input may start
    check_inputs(tmp_path, {"data.train": ("/d/train.jsonl", "sha256:bbb")})
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    check_inputs(tmp_path, {"data.train": ("/d/train.jsonl", "sha256:aaa"), "data.val": ("/d/v", "sha256:v")})
    with pytest.raises(RunMismatch, match=r"data\.train \(/d/train\.jsonl\): sha256:aaa\.\.\. when the run"):
        check_inputs(tmp_path, {"data.train": ("/d/train.jsonl", "sha256:bbb"), "model": ("m", "hub:m")})
    check_inputs(tmp_path / "nothing", {"data.train": ("f", "sha256:ccc")})  # no run yet: nothing to check


def test_a_subset_check_compares_only_the_given_fields(tmp_path: Path) -> None:
    write_identity(tmp_path, {"command": "eval", "benchmark": "bfcl", "seeds": [0]})
    (tmp_path / "verdicts.jsonl").write_text("{}\n")
    assert check_identity(tmp_path, {"command": "eval", "benchmark": "bfcl"}, resume=True, subset=True)
    with pytest.raises(RunMismatch, match='benchmark: "bfcl" vs "apibank"'):
        check_identity(tmp_path, {"command": "eval", "benchmark": "apibank"}, resume=True, subset=True)
    with pytest.raises(RunMismatch, match="seeds"):
        check_identity(tmp_path, {"command": "eval", "benchmark": "bfcl", "seeds": [1]}, resume=True)


def test_removed_on_failure_removes_only_what_the_failed_block_created(tmp_path: Path) -> None:
    new = tmp_path / "a" / "b" / "run"
    with pytest.raises(ValueError), removed_on_failure(new):
        new.mkdir(parents=True)
        write_identity(new, {"command": "x"})
        with RunLock(new):
            (new / "manifest.json").write_text("{}")
        raise ValueError("the run failed")
    assert not (tmp_path / "a").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(ValueError), removed_on_failure(existing):
        (existing / "partial.txt").write_text("")
        raise ValueError("failed")
    assert existing.is_dir() and (existing / "partial.txt").exists()  # never what was there before
    kept = tmp_path / "kept"
    with pytest.raises(KeyError), removed_on_failure(kept):
        kept.mkdir()
        (kept / "verdicts.jsonl").write_text('{"id": "x"}\n')
        raise KeyError("failed after results were written")
    assert (kept / "verdicts.jsonl").exists()  # a resume can continue them
    fine = tmp_path / "fine"
    with removed_on_failure(fine):
        fine.mkdir()
    assert fine.is_dir()
