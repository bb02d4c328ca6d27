"""Ground-truth players for every benchmark: the harness's own check that a perfect model scores 100%.

Each benchmark's `Benchmark.answers` says how a perfect model answers its entries (BFCL: the first
acceptable value of each argument, a no-call answer for irrelevance, a call of the first offered
function for live_relevance, the multi-turn ground truth step by step; API-Bank: the expected request;
ACEBench: the expected call, the expected sentence for special entries, the milestones for agents).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from tooltune.evaluation.benchmark import BENCHMARKS
from tooltune.evaluation.bfcl.benchmark import bfcl_answers
from tooltune.evaluation.controls import Controls
from tooltune.generation import GenerationRequest
from tooltune.prompts import resolve_native

__all__ = ["bfcl_answers", "ground_truth_policy"]


def ground_truth_policy(
    benchmark: str,
    template: str = "tool_n1",
    categories: Sequence[str] | str | None = None,
    data_dir: str | os.PathLike | None = None,
    controls: Controls | None = None,
) -> Callable[[GenerationRequest], str]:
    """A `ScriptedBackend` function answering every entry of `benchmark` with its ground truth, rendered
    for `template` (or `controls`, which then also give the scoring mode and the benchmark's own options,
    such as BFCL's name style); `data_dir` is the benchmark's data folder itself. A template answered in
    the model's own format is written as an endpoint writes its calls back
    (`tooltune.prompts.resolve_native` with no chat template) unless `controls` already hold one resolved
    for a model."""
    bench = BENCHMARKS[benchmark]
    controls = bench.controls(controls or Controls(template=template))
    # a scripted backend applies no chat template: a model's own format is written as an endpoint's
    controls = controls.with_template(resolve_native(None, controls.prompt_template, "controls.template"))
    return bench.answers(categories, controls, Path(data_dir) if data_dir else None)
