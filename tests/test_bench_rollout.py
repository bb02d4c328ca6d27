"""bench/rollout.py (`tooltune bench rollout`): the quick mode's rows, both paths run and compared."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROW_KEYS = {"case", "model", "prompt_len", "n", "new_tokens", "seconds_today", "seconds_new",
            "tokens_per_s_today", "tokens_per_s_new", "speedup", "tokens_equal"}


def _rollout_bench():
    sys.path[:0] = [str(REPO), str(REPO / "bench")]
    try:
        return importlib.import_module("bench.rollout")
    finally:
        sys.path.remove(str(REPO))
        sys.path.remove(str(REPO / "bench"))


def _rows(path: Path) -> list[dict]:
    return json.loads(path.read_text())["rows"]


def _check_common(row: dict) -> None:
    assert set(row) >= ROW_KEYS
    assert row["seconds_today"] > 0 and row["seconds_new"] > 0 and row["speedup"] > 0
    assert row["generated_today"] > 0 and row["generated_new"] > 0


def test_quick_run_through_the_cli_gives_equal_tokens_and_matching_logprobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooltune.cli import main

    monkeypatch.chdir(REPO)
    out = tmp_path / "rollout.json"
    assert main(["bench", "rollout", "--quick", "--threads", "1", "--out", str(out)]) == 0
    rows = _rows(out)
    by_case: dict[str, list[dict]] = {}
    for row in rows:
        _check_common(row)
        by_case.setdefault(row["case"], []).append(row)
    assert set(by_case) == {"grpo", "grpo_sampled", "episode", "step"}
    # the quick grid: prompts 24 and 40, n 3, 2 prompts a batch, 6 new tokens; the tiny model never stops
    assert [(r["prompt_len"], r["n"]) for r in by_case["grpo"]] == [(24, 3), (40, 3)]
    for row in by_case["grpo"] + by_case["episode"]:
        assert row["tokens_equal"] is True, row
        assert row["generated_today"] == row["generated_new"]
    assert all(r["generated_new"] == 2 * 3 * 6 for r in by_case["grpo"])
    assert by_case["grpo"][0]["path"] == "group_prefill"
    (sampled,) = by_case["grpo_sampled"]
    assert sampled["tokens_equal"] is None and sampled["temperature"] == 1.0
    assert 0 <= sampled["max_logprob_diff"] < 1e-4
    (episode,) = by_case["episode"]
    assert episode["turns"] == 3 and episode["generated_new"] == 2 * 3 * 6  # 2 episodes x 3 turns x 6
    (step,) = by_case["step"]
    assert step["tokens_equal"] is None and step["steps"] == 1
    assert step["rollout_s_today"] > 0 and step["rollout_s_new"] > 0 and step["update_s_new"] > 0
    assert step["group_prefill_today"] == [0.0] and step["group_prefill_new"] == [1.0]
    assert step["packed_update"] == {"today": [1.0], "new": [1.0]}
    for path in ("today", "new"):
        assert step[f"generation_cpu_s_{path}"] > 0 and step[f"rest_cpu_s_{path}"] > 0


def test_a_model_folder_runs_with_its_stop_tokens(tiny_model_dir: Path, tmp_path: Path) -> None:
    bench = _rollout_bench()
    out = tmp_path / "rollout.json"
    argv = ["--quick", "--model", str(tiny_model_dir), "--cases", "grpo,episode", "--threads", "1",
            "--out", str(out)]
    assert bench.main(argv) == 0
    rows = _rows(out)
    assert {r["model"] for r in rows} == {tiny_model_dir.name}
    for row in rows:
        _check_common(row)
        assert row["tokens_equal"] is True, row


def test_unknown_cases_and_models_are_refused() -> None:
    bench = _rollout_bench()
    with pytest.raises(SystemExit):
        bench.parse_args(["--cases", "grpo,warp"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--models", "tiny,gpt5"])
    args = bench.parse_args(["--quick"])
    assert args.models == "tiny" and args.ns == [3]


def test_rows_stop_after_the_first_stop_token() -> None:
    bench = _rollout_bench()
    assert bench.cut_at_stop([5, 6, 2, 7, 2], [2]) == [5, 6, 2]
    assert bench.cut_at_stop([5, 6, 7], [2]) == [5, 6, 7]
    assert bench.cut_at_stop([5, 6], []) == [5, 6]


def test_vllm_joins_the_grpo_cells_only_where_it_imports_or_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    bench = _rollout_bench()
    installed = importlib.util.find_spec("vllm") is not None
    assert bench.use_vllm(bench.parse_args([])) is installed  # auto
    assert bench.use_vllm(bench.parse_args(["--vllm", "on"])) is True
    assert bench.use_vllm(bench.parse_args(["--vllm", "off"])) is False
    assert bench.use_vllm(bench.parse_args(["--vllm", "on", "--cases", "episode,step"])) is False
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "vllm" else None)
    assert bench.use_vllm(bench.parse_args(["--cases", "grpo_sampled"])) is True
    line = bench.vllm_line({"seconds_vllm": 2.0, "tokens_per_s_vllm": 512.0, "speedup_vllm": 1.5,
                            "tokens_equal_vllm": True})
    assert "512.0 tok/s" in line and "1.50x" in line and line.endswith("yes")
