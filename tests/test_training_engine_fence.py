"""The fence around the engine the GRPO trainer subclasses: supported TRL / transformers versions, the
private methods it relies on, and the refusal of other versions at start."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from trl import GRPOTrainer

from tooltune.config import UserError
from tooltune.training import engine_fence
from tooltune.training.engine_fence import (
    PRIVATE_METHODS,
    SUPPORTED,
    EngineVersionError,
    check_engine_versions,
    installed_parameters,
    version_problem,
)
from tooltune.training.grpo import ToolTuneGRPOTrainer

REPO = Path(__file__).resolve().parents[1]


TOOLTUNE_CLASSES = tuple(c for c in ToolTuneGRPOTrainer.__mro__ if c.__module__.startswith("tooltune."))
# the shared-prefix, epoch and rollout mixins hold most overrides: each must be one of them
assert {c.__name__ for c in TOOLTUNE_CLASSES} >= {"ToolTuneGRPOTrainer", "SharedPrefixHooks", "EpochHooks",
                                                  "RolloutHooks"}
"""The trainer and its mixins (the shared-prefix, epoch and rollout hooks)."""


def overridden() -> set[str]:
    """Methods of GRPOTrainer (and its bases) that the trainer or its mixin redefines."""
    return {
        name
        for cls in TOOLTUNE_CLASSES
        for name, value in vars(cls).items()
        if callable(value) and not name.startswith("__") and hasattr(GRPOTrainer, name)
    }


def test_installed_versions_are_the_supported_ones() -> None:
    check_engine_versions()


def test_recorded_parameters_are_the_installed_ones() -> None:
    """Every private method the trainer overrides or calls has, in the installed TRL / transformers, the
    parameters recorded for the supported versions."""
    assert installed_parameters() == PRIVATE_METHODS


def test_every_override_and_private_call_is_recorded() -> None:
    assert overridden() <= set(PRIVATE_METHODS), sorted(overridden() - set(PRIVATE_METHODS))
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tooltune" / "training").glob("*.py"))
    called = {m for m in re.findall(r"\.(_[a-z][a-z_]+)\(", source) if hasattr(GRPOTrainer, m)}
    assert called <= set(PRIVATE_METHODS), sorted(called - set(PRIVATE_METHODS))
    assert set(PRIVATE_METHODS) <= overridden() | called  # nothing recorded that is no longer used


@pytest.mark.parametrize("name", sorted(overridden()))
def test_each_override_accepts_the_base_parameters(name: str) -> None:
    """An override takes every parameter of the method it replaces: by name, positionally in the same
    place, or through *args / **kwargs."""
    base = inspect.signature(getattr(GRPOTrainer, name)).parameters
    ours = inspect.signature(next(vars(c)[name] for c in TOOLTUNE_CLASSES if name in vars(c))).parameters
    kinds = {p.kind for p in ours.values()}
    names = list(ours)
    for i, (pname, p) in enumerate(base.items()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if pname in ours:
            if p.kind is p.POSITIONAL_OR_KEYWORD and ours[pname].kind is p.POSITIONAL_OR_KEYWORD:
                assert names.index(pname) == i, f"{name}: {pname} moved"
            continue
        assert inspect.Parameter.VAR_KEYWORD in kinds, f"{name}: {pname} is not accepted"


def test_pyproject_pins_the_supported_range() -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    for package, (low, high) in SUPPORTED.items():
        assert f'"{package}>={low},<{high}"' in text


@pytest.mark.parametrize(("installed", "ok"), [("1.16.0", True), ("1.16.3", True), ("1.17.0", False),
                                               ("1.15.2", False), ("2.0.0", False)])
def test_trl_versions_outside_the_range_are_refused_in_one_line(installed: str, ok: bool) -> None:
    problem = version_problem("trl", installed)
    assert (problem is None) == ok
    if not ok:
        assert "\n" not in problem and "trl>=1.16.0,<1.17" in problem and installed in problem


def test_a_run_is_refused_at_start_with_another_trl(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_training_grpo import make_config

    from tooltune.training.runner import train

    real = engine_fence.metadata.version
    monkeypatch.setattr(engine_fence.metadata, "version", lambda p: "1.17.0" if p == "trl" else real(p))
    with pytest.raises(EngineVersionError, match=r"trl 1\.17\.0 is not supported.*trl>=1\.16\.0,<1\.17"):
        train(make_config(tiny_model_dir, tmp_path / "run"), train_rows=[{"prompt": []}])
    assert not (tmp_path / "run").exists()  # refused before any work
    monkeypatch.setenv(engine_fence.ALLOW_ENV, "1")
    engine_fence.check_engine_versions()  # the user's own risk: a warning, no refusal
    assert issubclass(EngineVersionError, UserError)  # the CLI prints it on one line, exit status 2
