"""bench/plain_text.py (`tooltune bench plain_text`): the forged-turn counts and the cost lines."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_bench_counts_the_forged_markers_before_and_after(
    tiny_model_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    sys.path.insert(0, str(REPO))
    try:
        bench = importlib.import_module("bench.plain_text")
    finally:
        sys.path.remove(str(REPO))
    assert bench.main(["--tokenizer", str(tiny_model_dir), "--repeats", "1", "--max-chars", "10000"]) == 0
    out = capsys.readouterr().out
    assert out.count("before 9, after 3") == 2  # a tool result and a user's reply
    assert "ordinary tool results" in out and "10,000 characters" in out and "100,000" not in out
