"""Run folders: one writer at a time, results of one run only, append-only files that survive a kill.

A command that writes results into a folder (an evaluation, a training run, the quickstart) uses three
things from here; each is independent of what the results are.

**One writer.** `with RunLock(folder):` takes an exclusive advisory lock (`fcntl.flock` on
`folder/.lock`, non-blocking) and writes the holder's pid, host, command and start time into that
file. A second process asking for the same folder gets `RunFolderBusy`, whose message names the
folder and the holder. The lock is released when the block ends, and by the operating system when
the process dies (killed included), so a killed run can be resumed at once; the `.lock` file itself
stays (removing it would let two processes lock two different files) and is emptied on a clean exit.
A nested `RunLock` on a folder the same thread already holds is a no-op, so a command may hold the
folder around a library call that locks it too; another thread of the same process gets
`RunFolderBusy`. A process forked while holding the lock shares it until the child exits too.

**One run per folder.** The caller describes what defines its results as `fields`: a flat dict of
JSON values (the command, the benchmark, the template, the sampling settings, sha256 of the inputs,
the versions of the packages that compute scores; the caller chooses). Before writing anything:

    with RunLock(out):
        resuming = check_identity(out, fields, resume)   # RunMismatch when the folder is not ours
        if not resuming:
            write_identity(out, fields)                   # out/run.json
            ...start fresh...
        else:
            ...keep the finished results, append the rest...

`check_identity` returns False for a missing or empty folder (nothing to resume; a folder holding
only dot-files and `run.json` counts as empty), True when the folder holds this same run and
`resume` is set. It raises `RunMismatch` when the folder holds another run (the message names
every differing field, nested keys dotted, with the folder's value and this run's), when it holds
this run but `resume` is not set (so that finished results are never wiped by a forgotten flag), and
when it holds files but no readable `run.json` (its owner cannot be checked).

**Append-only JSONL.** `drop_torn_tail(path)` makes a JSONL file end at a complete line before more
lines are appended: a last line cut by a kill (no trailing newline, or not JSON) is removed, so the
next record never glues onto it; a complete JSON last line that only lacks its newline gets one.

Only the standard library is used.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not a POSIX system: folders are not locked
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

LOCK_NAME = ".lock"
"""The lock file inside a run folder."""

IDENTITY_NAME = "run.json"
"""The file inside a run folder holding the fields that define its results."""


class RunFolderBusy(RuntimeError):
    """Another process (or another thread of this one) is writing to the run folder."""


class RunMismatch(ValueError):
    """The run folder holds results that are not this run's, or this run's without resuming them."""


# --------------------------------------------------------------------------------------------
# One writer


_HELD: dict[str, list[int]] = {}
"""Folders this process holds: real path -> [owning thread id, nesting depth, lock file descriptor]."""
_HELD_GUARD = threading.Lock()


def _command() -> str:
    argv = list(sys.argv) or ["python"]
    return shlex.join([Path(argv[0]).name, *argv[1:]])


def _holder_text(raw: str) -> str:
    try:
        info = json.loads(raw)
    except json.JSONDecodeError:
        info = None
    if not isinstance(info, dict):
        return "a process that has not written its details yet"
    return (f"pid {info.get('pid', '?')} on {info.get('host', '?')}, started {info.get('started', '?')}, "
            f"command: {info.get('command', '?')}")


class RunLock:
    """Exclusive advisory lock on a run folder (created if missing) for the duration of a `with` block.

    `command` is recorded in the lock file for the message another writer gets (default: this
    process's command line)."""

    def __init__(self, folder: str | os.PathLike, command: str | None = None) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.command = command if command is not None else _command()
        self._key = ""

    def acquire(self) -> RunLock:
        self.folder.mkdir(parents=True, exist_ok=True)
        key = os.path.realpath(self.folder)
        me = threading.get_ident()
        with _HELD_GUARD:
            held = _HELD.get(key)
            if held is not None:
                if held[0] != me:
                    raise RunFolderBusy(f"{self.folder} is in use by another thread of this process "
                                        f"(pid {os.getpid()}); write to another output folder")
                held[1] += 1
                self._key = key
                return self
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raw = os.pread(fd, 1 << 16, 0).decode("utf-8", "replace")
                    os.close(fd)
                    raise RunFolderBusy(
                        f"{self.folder} is in use by another run ({_holder_text(raw)}): wait for it to "
                        "end, or write to another output folder") from None
                except BaseException:
                    os.close(fd)
                    raise
            else:
                logger.warning("%s: not locked (this system has no fcntl.flock)", self.folder)
            info = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode("utf-8"), 0)
            _HELD[key] = [me, 1, fd]
            self._key = key
        return self

    def release(self) -> None:
        if not self._key:
            return
        with _HELD_GUARD:
            held = _HELD[self._key]
            held[1] -= 1
            if held[1] == 0:
                del _HELD[self._key]
                fd = held[2]
                try:
                    os.ftruncate(fd, 0)
                finally:
                    os.close(fd)  # closing the last descriptor releases the flock
            self._key = ""

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


# --------------------------------------------------------------------------------------------
# One run per folder


_MISSING = object()


def _show(value: Any) -> str:
    return "missing" if value is _MISSING else json.dumps(value, ensure_ascii=False, sort_keys=True)


def differences(stored: Mapping[str, Any], fields: Mapping[str, Any], prefix: str = "") -> list[str]:
    """'key: <stored> vs <fields>' for every key whose values differ; nested mappings give dotted keys."""
    out = []
    for key in list(stored) + [k for k in fields if k not in stored]:
        a, b = stored.get(key, _MISSING), fields.get(key, _MISSING)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {_show(a)} vs {_show(b)}")
    return out


def _normalized(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` as they read back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(dict(fields)))


def read_identity(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The fields stored in `folder/run.json`, or None when there is no such file.

    Raises RunMismatch when the file exists but is not a JSON object."""
    path = Path(folder) / IDENTITY_NAME
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RunMismatch(f"{path} cannot be read ({e}): which run {path.parent} holds is unknown; "
                          "write to another output folder") from None
    if not isinstance(stored, dict):
        raise RunMismatch(f"{path} is not a JSON object: which run {path.parent} holds is unknown; "
                          "write to another output folder")
    return stored


def write_identity(folder: str | os.PathLike, fields: Mapping[str, Any]) -> Path:
    """Write `fields` to `folder/run.json` (atomically: a kill leaves the old file or the new one)."""
    path = Path(folder) / IDENTITY_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{IDENTITY_NAME}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_normalized(fields), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def check_identity(folder: str | os.PathLike, fields: Mapping[str, Any], resume: bool) -> bool:
    """Whether `folder` holds this run to resume (True) or nothing yet (False); RunMismatch otherwise.

    See the module docstring for the cases. Call it while holding the folder's RunLock."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    content = sorted(p.name for p in folder.iterdir()
                     if not p.name.startswith(".") and p.name != IDENTITY_NAME)
    stored = read_identity(folder)
    if not content:
        return False  # nothing but an identity: no results to keep or to mix with
    if stored is None:
        shown = ", ".join(content[:5]) + (", ..." if len(content) > 5 else "")
        raise RunMismatch(f"{folder} is not empty ({shown}) and has no {IDENTITY_NAME}, so which run "
                          "its files belong to is unknown: write to a new or empty folder")
    diffs = differences(stored, _normalized(fields))
    if diffs:
        how = ("a run resumes only with the settings it started with: repeat those, or write to another "
               "output folder" if resume else "write to another output folder (or remove this one)")
        plural = "s" if len(diffs) > 1 else ""
        raise RunMismatch(f"{folder} holds another run ({len(diffs)} difference{plural}, the folder's value "
                          f"vs this run's: {'; '.join(diffs)}): {how}")
    if not resume:
        raise RunMismatch(f"{folder} already holds this run's results: pass --resume to continue it, or "
                          "write to another output folder (or remove this one) to start over")
    return True


# --------------------------------------------------------------------------------------------
# Append-only JSONL files


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def drop_torn_tail(path: str | os.PathLike) -> bool:
    """Make the JSONL file `path` end with a complete line; True when it was changed.

    A last line without its newline is kept (the newline added) when it is complete JSON and cut off
    otherwise; a last line with its newline that is not JSON is cut off too. Earlier lines are not
    read. A missing or empty file is left alone."""
    path = Path(path)
    try:
        f = open(path, "r+b")  # noqa: SIM115 (closed below; a missing file is not an error)
    except FileNotFoundError:
        return False
    with f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return False
        f.seek(size - 1)
        has_newline = f.read(1) == b"\n"
        body_end = size - 1 if has_newline else size
        start, pos, chunk = 0, body_end, 1 << 16
        while pos > 0:  # find the newline before the last line
            lo = max(0, pos - chunk)
            f.seek(lo)
            cut = f.read(pos - lo).rfind(b"\n")
            if cut >= 0:
                start = lo + cut + 1
                break
            pos = lo
        f.seek(start)
        last = f.read(body_end - start)
        if _is_json(last):
            if has_newline:
                return False
            f.seek(size)
            f.write(b"\n")
            logger.warning("%s: added the newline missing after the last line", path)
            return True
        f.truncate(start)
        logger.warning("%s: dropped an unfinished last line (%d bytes)", path, size - start)
        return True
