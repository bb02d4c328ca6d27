"""A watchdog process that ends the process groups of MCP servers when tooltune ends, however it ends.

Every stdio server starts in a session (and process group) of its own, so that the server and every
helper process it starts can be ended together (`os.killpg`). Closing a connection ends its group. What
no code in tooltune can do is run after a SIGKILL (or after a SIGTERM without a handler): for those,
`Reaper` starts this module as a small separate process (standard library only, ``python -I``) and
writes it the group of each server it starts (``+pgid``) and of each it has ended (``-pgid``). When its
standard input reaches end of file (tooltune has exited, by any path, and the kernel closed the pipe) it
sends SIGTERM to every group still listed, waits up to `GRACE_SECONDS`, sends SIGKILL to those left, and
exits. It ignores SIGINT and SIGHUP (a Ctrl-C to the terminal reaches the whole foreground group).

A server that leaves its process group (a daemon that calls setsid) cannot be found this way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable

GRACE_SECONDS = 2.0
"""Time the groups have to end after SIGTERM before SIGKILL."""


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to process group `pgid` (0: only ask whether it exists); whether it had a member."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # the group id was reused by another user's processes
        return False
    return True


def end_groups(groups: Iterable[int], grace: float = GRACE_SECONDS) -> None:
    """SIGTERM to every process group in `groups`, then SIGKILL to those still there after `grace`."""
    groups = {g for g in groups if signal_group(g, signal.SIGTERM)}
    deadline = time.monotonic() + grace
    while groups and time.monotonic() < deadline:
        groups = {g for g in groups if signal_group(g, 0)}
        time.sleep(0.02)
    for pgid in groups:
        signal_group(pgid, signal.SIGKILL)


def watch(lines: Iterable[bytes]) -> set[int]:
    """Read ``+pgid`` / ``-pgid`` lines until they end; the groups still listed then."""
    groups: set[int] = set()
    for line in lines:
        text = line.strip()
        if text[:1] in (b"+", b"-") and text[1:].isdigit() and int(text[1:]) > 1:
            (groups.add if text[:1] == b"+" else groups.discard)(int(text[1:]))
    return groups


class Reaper:
    """tooltune's side of the watchdog: started at the first `register`, one per process."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _send(self, line: str) -> None:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                if line.startswith("-"):
                    return
                try:
                    self._proc = subprocess.Popen(
                        [sys.executable, "-I", os.path.abspath(__file__)], stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                except OSError:  # no watchdog: closing still ends the groups on every other path
                    return
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(line.encode() + b"\n")
                self._proc.stdin.flush()
            except (OSError, ValueError):
                pass

    def register(self, pgid: int) -> None:
        """The watchdog ends group `pgid` if tooltune ends before `forget(pgid)`."""
        self._send(f"+{pgid}")

    def forget(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    def after_fork(self) -> None:
        """In a forked child: let go of the parent's watchdog without holding its pipe open."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        self._lock = threading.Lock()


REAPER = Reaper()
"""The process's watchdog client."""

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    end_groups(watch(sys.stdin.buffer))
