"""bench/gpu.py (`tooltune bench gpu`): the quick mode runs every part at tiny shapes on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import bench_module

REPO = Path(__file__).resolve().parents[1]


def _gpu():
    return bench_module("gpu")


def test_quick_run_through_the_cli_writes_every_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tooltune.cli import main
    from tooltune.experiment.synthetic import STAGES

    monkeypatch.chdir(REPO)
    out = tmp_path / "gpu"
    assert main(["bench", "gpu", "--quick", "--threads", "1", "--out", str(out)]) == 0
    result = json.loads((out / "gpu.json").read_text())
    assert result["quick"] and result["device"]["torch"] and result["peak"]["tflops"] > 0
    gpu = _gpu()
    cells = {(r["path"], r["checkpointing"]): r for r in result["update"]}
    assert set(cells) == set(gpu.VARIANTS)
    for (path, _), row in cells.items():
        if path == "packed_flex" and not result["device"]["cuda"]:
            assert row["status"].startswith("skipped: flex_attention has no backward on CPU")
        else:
            assert row["status"] == "ok" and row["seconds"] > 0 and row["mfu"] > 0
    train = result["train"]
    assert train["steps"] == 1 and train["rollout_s"] > 0 and train["update_s"] > 0
    assert train["generated_tokens"] > 0 and train["generation_tokens_per_s"] > 0
    assert train["update_plan"]["checkpointing"] is False  # on CPU
    assert set(result["quickstart"]["stage_seconds"]) == set(STAGES)
    rollout = result["rollout"]
    assert {r["case"] for r in rollout} == {"grpo", "grpo_sampled", "episode", "step"}
    assert all(r["tokens_equal"] is not False and r["speedup"] > 0 for r in rollout)
    table = (out / "gpu.md").read_text()
    assert "| shape | prompt | n | path |" in table and "--quick: smoke test" in table
    assert all(f"| {path} |" in table for path, _ in gpu.VARIANTS)
    assert "| episode | tiny |" in table


def test_flops_count_the_work_each_variant_does() -> None:
    gpu = _gpu()
    dims = gpu.QWEN25["1.5B"]
    ordinary = gpu.flops(dims, gpu.VOCAB, 2, 8, 2048, 256, shared=False)
    shared = gpu.flops(dims, gpu.VOCAB, 2, 8, 2048, 256, shared=True)
    # the layers' matmuls alone: 2 x 1.31B body weights per token, x3 for forward + backward
    hidden, mlp, layers, heads, kv = dims
    body = layers * (hidden * (hidden // heads) * (2 * heads + 2 * kv) + 3 * hidden * mlp)
    assert ordinary > 6 * body * 16 * (2048 + 256)
    tokens_ratio = (16 * 2304) / (2 * 2048 + 16 * 257)
    assert tokens_ratio * 0.8 < ordinary / shared < tokens_ratio * 1.5


def test_unknown_parts_are_refused() -> None:
    with pytest.raises(SystemExit):
        _gpu().parse_args(["--parts", "peak,warp"])
    args = _gpu().parse_args(["--quick"])
    assert args.shapes == ["tiny"] and args.repeats == 1
