"""Peak resident memory of a phase: counted from the phase's start, nested phases included."""

from __future__ import annotations

import time

import pytest

from tooltune.experiment import memory
from tooltune.experiment.memory import PeakMemory, status_kb

MB = 1024 * 1024


def _touch(megabytes: int) -> None:
    block = bytearray(megabytes * MB)  # zero-filled: every page is resident
    del block


@pytest.mark.skipif(status_kb("VmRSS") is None, reason="no /proc/self/status on this system")
def test_a_phase_peak_counts_from_its_start_and_an_inner_peak_counts_for_the_outer() -> None:
    _touch(300)  # an earlier peak the phases below must not report
    with PeakMemory() as outer:
        with PeakMemory() as inner:
            _touch(120)
        _touch(20)
    base = (status_kb("VmRSS") or 0) / 1024
    assert inner.peak_mb is not None and outer.peak_mb is not None
    assert base + 100 < inner.peak_mb < base + 250
    assert outer.peak_mb >= inner.peak_mb
    # each block starts from the resident memory at its entry: the inner one added its 120 MB over it
    assert inner.start_mb is not None and 100 < inner.peak_mb - inner.start_mb < 250


@pytest.mark.skipif(status_kb("VmRSS") is None, reason="no /proc/self/status on this system")
def test_without_a_resettable_mark_a_thread_samples_the_resident_memory(monkeypatch) -> None:
    monkeypatch.setattr(memory, "reset_peak", lambda: False)
    with PeakMemory(interval=0.01) as phase:
        block = bytearray(80 * MB)
        time.sleep(0.1)
        del block
    assert phase.peak_mb is not None and phase.peak_mb >= 80


def test_no_proc_gives_no_peak(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(memory, "STATUS", tmp_path / "missing")
    monkeypatch.setattr(memory, "CLEAR_REFS", tmp_path / "missing_dir" / "clear_refs")
    with PeakMemory() as phase:
        pass
    assert phase.peak_mb is None
