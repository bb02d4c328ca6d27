"""One writer per run folder: `RunLock` (see the package docstring)."""

from __future__ import annotations

import json
import logging
import os
import shlex
import socket
import sys
import threading
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # not a POSIX system: folders are not locked
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

LOCK_NAME = ".lock"
"""The lock file inside a run folder."""


class RunFolderBusy(RuntimeError):
    """Another process (or another thread of this one) is writing to the run folder."""


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

