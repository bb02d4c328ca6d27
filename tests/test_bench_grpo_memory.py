"""bench/grpo_memory.py: each wrapped phase records its own peak resident memory, the table tells an
update that held a rollout from one that did not, and the phases it wraps exist on the trainer."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import bench_module

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")


def _memory():
    return bench_module("grpo_memory")


class Worker:
    def allocate(self, mb: int) -> int:
        block = np.ones(mb * 1024 * 1024 // 8)  # touched, so resident
        return int(block.size)

    def nothing(self) -> int:
        return 0


@linux_only
def test_a_wrapped_phase_records_its_own_peak_and_the_sampler_its_timeline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mem = _memory()
    for name in ("allocate", "nothing"):
        monkeypatch.setattr(Worker, name, getattr(Worker, name))  # restored after the test
    with mem.PhaseRecorder(interval=0.01) as recorder:
        recorder.wrap(Worker, "allocate", "rollout")
        recorder.wrap(Worker, "nothing", "optimizer")
        w = Worker()
        w.nothing()
        assert w.allocate(300) == 300 * 1024 * 1024 // 8  # the wrapper returns what the method returns
        w.nothing()
    calls = {c["phase"]: c for c in recorder.calls}
    assert [c["phase"] for c in recorder.calls] == ["optimizer", "rollout", "optimizer"]
    # the allocation's 300 MB show in its phase and not in the next phase's own peak
    assert calls["rollout"]["peak_mb"] - recorder.calls[0]["peak_mb"] >= 250
    assert recorder.calls[2]["peak_mb"] < calls["rollout"]["peak_mb"] - 250
    assert recorder.samples and all(mb > 0 for _, mb in recorder.samples)
    # each call starts from the resident memory before it: the allocation's phase rose by its 300 MB
    assert all(c["start_mb"] > 0 for c in recorder.calls)
    assert calls["rollout"]["peak_mb"] - calls["rollout"]["start_mb"] >= 250
    assert mem.phase_table(recorder.calls)[0]["rise_mb"] >= 250


@linux_only
def test_trim_hands_freed_blocks_back_before_every_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    mem = _memory()
    trims: list[int] = []
    monkeypatch.setattr(mem, "_malloc_trim", lambda: trims.append)
    monkeypatch.setattr(Worker, "nothing", Worker.nothing)
    with mem.PhaseRecorder(interval=0.01, trim=True) as recorder:
        recorder.wrap(Worker, "nothing", "optimizer")
        Worker().nothing()
        Worker().nothing()
    assert trims == [0, 0] and len(recorder.calls) == 2
    with mem.PhaseRecorder(interval=0.01) as recorder:  # off by default
        assert recorder.trim is None


def test_the_table_tells_updates_that_held_a_rollout_from_those_that_did_not() -> None:
    mem = _memory()
    calls = [
        {"phase": "update", "start_s": 0.0, "seconds": 10.0, "peak_mb": 9000.0},
        {"phase": "rollout", "start_s": 1.0, "seconds": 5.0, "peak_mb": 9000.0},
        {"phase": "optimizer", "start_s": 10.0, "seconds": 1.0, "peak_mb": 7000.0},
        {"phase": "update", "start_s": 11.0, "seconds": 4.0, "peak_mb": 6500.0},
        {"phase": "validation", "start_s": 15.0, "seconds": 2.0, "peak_mb": None},
    ]
    rows = {r["phase"]: r for r in mem.phase_table(calls)}
    assert rows["update"] == {"phase": "update", "calls": 2, "seconds": 14.0, "peak_mb": 9000.0,
                              "rise_mb": None, "update_only_peak_mb": 6500.0}
    assert rows["rollout"]["peak_mb"] == 9000.0 and rows["optimizer"]["calls"] == 1
    assert "validation" not in rows  # no peak could be read: no row rather than a made-up one


def test_the_phases_it_wraps_exist_where_the_pipeline_builds_them(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from tooltune.training.diagnostics import HeldOutEval
    from tooltune.training.grpo import ToolTuneGRPOTrainer

    mem = _memory()
    targets = [(ToolTuneGRPOTrainer, "_generate_and_score_completions"),
               (ToolTuneGRPOTrainer, "training_step"), (torch.optim.AdamW, "step"), (HeldOutEval, "_run")]
    for owner, name in targets:
        monkeypatch.setattr(owner, name, getattr(owner, name))  # restored after the test
    recorder = mem.PhaseRecorder(interval=1.0)
    mem.instrument(recorder)
    for owner, name in targets:
        assert hasattr(getattr(owner, name), "__wrapped__"), f"{owner.__name__}.{name} is not wrapped"
