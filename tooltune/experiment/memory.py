"""Peak resident memory of a phase of this process, for the quickstart's phase table.

The kernel keeps one high-water mark of resident memory per process (``VmHWM`` in
``/proc/self/status``), a lifetime maximum: a phase's own peak needs the mark reset when the phase
starts, which writing ``5`` to ``/proc/self/clear_refs`` does (Linux 4.0 and later). Where that write is
refused, a thread samples ``VmRSS`` instead (every `interval` seconds: a peak shorter than that can be
missed). Where there is no ``/proc`` (macOS, Windows) the peak is None. Blocks nest: an inner block's
reset would hide the outer block's earlier peak, so an inner block's peak counts for every block around it.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from types import TracebackType

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def status_kb(field: str) -> int | None:
    """A ``kB`` field of /proc/self/status (``VmHWM``, ``VmRSS``), None where it cannot be read."""
    try:
        found = re.search(rf"^{field}:\s+(\d+) kB", STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) if found else None


def reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its current resident memory; False where that is not allowed."""
    try:
        CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


class PeakMemory:
    """``with PeakMemory() as m: ...`` then `m.peak_mb`: the most resident memory (MB) the process held
    inside the block, counted from the block's start (see the module doc for how); `m.start_mb` is the
    resident memory the block started from, so `peak_mb - start_mb` is what the block itself added."""

    _open: list[PeakMemory] = []  # the blocks entered and not left, outermost first

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.peak_mb: float | None = None
        self.start_mb: float | None = None
        self._reset = False
        self._sampled = 0  # kB: the most sampled, or the peak of an inner block
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._sampled = max(self._sampled, status_kb("VmRSS") or 0)

    def __enter__(self) -> PeakMemory:
        self._reset = reset_peak()
        rss = status_kb("VmRSS")
        self.start_mb = None if rss is None else round(rss / 1024, 1)
        if not self._reset and rss is not None:
            self._sampled = rss
            self._thread = threading.Thread(target=self._sample, name="peak-rss", daemon=True)
            self._thread.start()
        PeakMemory._open.append(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        PeakMemory._open.remove(self)
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            peak = max(self._sampled, status_kb("VmRSS") or 0)
        else:
            hwm = status_kb("VmHWM") if self._reset else None
            peak = None if hwm is None else max(hwm, self._sampled)
        for outer in PeakMemory._open:
            outer._sampled = max(outer._sampled, peak or 0)
        self.peak_mb = None if peak is None else round(peak / 1024, 1)
