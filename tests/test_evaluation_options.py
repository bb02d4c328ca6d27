"""`EvalOptions`: the one object `evaluate` takes, built from the command line's `RunOptions`."""

from __future__ import annotations

import dataclasses

import pytest

from tooltune.config import ConfigError
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.options import EvalOptions, RunOptions
from tooltune.evaluation.runner import evaluate
from tooltune.generation import Sampling, ScriptedBackend


def test_eval_options_hold_the_run_options_and_the_rest() -> None:
    run = RunOptions(out="o", categories="level-1", seeds=2, resume=True, subset=5, subset_seed=3)
    options = EvalOptions.of(run, controls=Controls(template="r2if"), model="m")
    shared = {f.name: getattr(options, f.name) for f in dataclasses.fields(RunOptions)}
    assert shared == dataclasses.asdict(run)
    assert options.controls == Controls(template="r2if") and options.model == "m"
    assert options.sampling == Sampling() and options.user_backend is None and options.show_progress
    assert options.subset_spec() == run.subset_spec()


def test_evaluate_needs_an_output_folder() -> None:
    with pytest.raises(ConfigError, match="out: evaluate needs an output folder"):
        evaluate("apibank", ScriptedBackend(lambda r: ""), EvalOptions())
