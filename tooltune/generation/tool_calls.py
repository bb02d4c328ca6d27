"""The tool calls of one round of episodes, run side by side across episodes (`run_tool_calls`).

An episode's executor that has a ``concurrency`` attribute, ``(key, limit)``, lets its calls run on a
worker thread next to other episodes' calls, at most ``limit`` at once per ``key`` (one server: the
`mcp` environment sets it); one without it runs its calls on the caller's thread, one episode after
another (an environment whose step budget interrupts pure Python code needs the main thread). Each
episode's own calls run in order, on one thread.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Sequence
from typing import Any, Protocol

TOOL_THREADS = 32
"""Tool calls of different episodes in flight at once in one round (the default of `drive`)."""


class CallingRun(Protocol):
    """An episode with a step whose calls are to run (`tooltune.generation.episodes.EpisodeRun`)."""

    executor: Any

    def run_calls(self, gate: threading.Semaphore | None = None) -> None: ...


def _concurrency(run: CallingRun) -> tuple[str, int] | None:
    value = getattr(run.executor, "concurrency", None)
    return (str(value[0]), max(1, int(value[1]))) if value else None


def run_tool_calls(runs: Sequence[CallingRun], threads: int = TOOL_THREADS) -> None:
    """`run_calls` of every episode in `runs` (module docstring), `threads` worker threads at most.
    Returns when every call has run; an executor's exception is raised here."""
    side_by_side = [r for r in runs if threads > 1 and _concurrency(r)] if len(runs) > 1 else []
    here = [r for r in runs if r not in side_by_side]
    gates: dict[str, threading.Semaphore] = {}
    for r in side_by_side:
        key, limit = _concurrency(r)  # type: ignore[misc]
        gates.setdefault(key, threading.BoundedSemaphore(limit))
    if not side_by_side:
        for r in here:
            r.run_calls()
        return
    with concurrent.futures.ThreadPoolExecutor(min(threads, len(side_by_side)), "tooltune-tools") as pool:
        futures = [pool.submit(r.run_calls, gates[_concurrency(r)[0]]) for r in side_by_side]  # type: ignore[index]
        for r in here:
            r.run_calls()
        for f in futures:
            f.result()
