"""Shared pytest fixtures: repository paths, the benchmark data folder ($TOOLTUNE_DATA_DIR), a tiny model.

Tests never reach a model or dataset hub: the Hugging Face offline flags are forced here, before any
test module imports transformers. Torch uses 2 threads (the CI machines have 2 cores).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "2")

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    try:
        import torch
    except ImportError:  # lint-only environments
        return
    torch.set_num_threads(2)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (the folder holding pyproject.toml)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The benchmark data folder named by $TOOLTUNE_DATA_DIR (holding acebench/ and apibank/)."""
    env = os.environ.get("TOOLTUNE_DATA_DIR")
    if not env:
        pytest.skip("benchmark data not given: set TOOLTUNE_DATA_DIR to the folder holding acebench/ "
                    "and apibank/")
    path = Path(env)
    if not path.is_dir():
        pytest.skip(f"TOOLTUNE_DATA_DIR={env} is not a folder: set it to the folder holding acebench/ "
                    "and apibank/")
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A test-size tiny model + tokenizer (built once per session), loadable with from_pretrained."""
    from tooltune.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), size="test", seed=0)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    """The test-size tiny model's tokenizer (its chat template carries tools: the ``native`` template)."""
    from transformers import AutoTokenizer  # deferred: heavy

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def bfcl_project_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    """bfcl-eval writes result/, score/ and .file_locks/ under $BFCL_PROJECT_ROOT when imported: a scratch
    folder unless the caller named one."""
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(tmp_path_factory.mktemp("bfcl_root")))


@pytest.fixture
def budget_bars(monkeypatch: pytest.MonkeyPatch) -> list:
    """The budget progress bars (`tooltune.training.progress.SecondsBar`) a test opens, in order."""
    from tooltune.training import progress

    bars: list = []

    class RecordedBar(progress.SecondsBar):
        def __init__(self, *args, **kw) -> None:
            super().__init__(*args, **kw)
            bars.append(self)

    monkeypatch.setattr(progress, "SecondsBar", RecordedBar)
    return bars


def bench_module(name: str):  # noqa: ANN201 (a module of bench/)
    """`bench/<name>.py` imported as `bench.<name>` (bench/ is a folder of scripts, not a package on the
    path): the tests of a benchmark call its functions directly."""
    import importlib
    import sys

    root = str(REPO_ROOT)
    sys.path.insert(0, root)
    try:
        return importlib.import_module(f"bench.{name}")
    finally:
        sys.path.remove(root)

