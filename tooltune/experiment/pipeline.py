"""The experiment pipeline: runs a profile's stages in a run folder, in order, and writes the report.

`Pipeline(out, cfg, profile=...)` opens the run folder `out` (`tooltune.experiment.run_folder`: one run,
one writer) and `run()` runs the profile's stages: the synthetic demo (`tooltune.experiment.synthetic`,
the default) or the real-model recipe (`tooltune.experiment.real`). Every stage writes
`DIR/stages/<stage>.json` when it finishes; running again skips finished stages (SFT and GRPO also
resume from inside the stage: `tooltune.experiment.stages`); other stages are redone. After the SFT
stage the folder gets `train.yaml`: `tooltune train --config DIR/train.yaml` runs the SFT and GRPO
stages again. The report is written from whatever stages finished, with what a branched folder shares
with its source (`tooltune.experiment.branch`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tooltune import config as config_mechanism
from tooltune.experiment.branch import branch_notes
from tooltune.experiment.config import QuickstartConfig
from tooltune.experiment.memory import PeakMemory
from tooltune.experiment.run_folder import Profile, RunFolder
from tooltune.experiment.synthetic import synthetic_profile
from tooltune.rundir import RunLock


class Pipeline(RunFolder):
    """Runs the stages of `profile` (the synthetic profile by default) in `out`; `say` prints the story
    (the CLI passes print, tests a no-op)."""

    def __init__(self, out: str | Path, cfg: QuickstartConfig, say: Callable[[str], None] = print,
                 profile: Profile | None = None):
        super().__init__(out, cfg, say, profile or synthetic_profile())

    def run(self, stop_after: str | None = None) -> dict[str, Any]:
        with RunLock(self.out):
            return self._run(stop_after)

    def run_stage(self, name: str) -> dict[str, Any]:
        """Stage `name` (skipped when finished), seeded by its place in the profile and timed, so a stage run
        on its own (e.g. an evaluation in a second process beside the training) equals one run in order."""
        stages = self.profile.stages
        i = stages.index(name) + 1
        if self.done(name):
            self.say(f"[{i}/{len(stages)}] {name}: already finished, skipping (resume)")
            return self.result(name)
        self.say(f"[{i}/{len(stages)}] {name}: {self.profile.descriptions[name]}")
        torch.manual_seed(self.cfg.seed * 1000 + i)
        w, c = time.perf_counter(), time.process_time()
        with PeakMemory() as memory:
            res = self.profile.functions[name](self)
        res["timing"] = {
            "wall_s": time.perf_counter() - w,
            "cpu_s": time.process_time() - c,
            "loadavg_end": os.getloadavg()[0],
            "peak_rss_mb": memory.peak_mb,
        }
        self._finish(name, res)
        self.say(f"    {self.profile.headline(name, res)}  ({res['timing']['wall_s']:.0f} s)")
        return res

    def report(self) -> dict[str, Any]:
        """The profile's report from the stages finished so far."""
        results = {s: self.result(s) for s in self.profile.stages if self.done(s)}
        return self.profile.report(self.out, self.cfg.to_dict(), results, notes=branch_notes(self.out))

    def _run(self, stop_after: str | None) -> dict[str, Any]:
        torch.set_num_threads(self.cfg.threads)
        t0 = time.perf_counter()
        stages = self.profile.stages
        for name in stages:
            self.run_stage(name)
            if name == "sft":
                config_mechanism.dump(self.train_config("reproduce"), self.out / "train.yaml")
            if name == stop_after:
                break
        report = self.report()
        report["timings"]["this_invocation_s"] = time.perf_counter() - t0
        return report
