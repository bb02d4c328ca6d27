"""bench/prefill.py: both arms run in their own processes on the same prompts and give the same tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_both_arms_give_the_same_tokens(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "prefill.json"
    cmd = [sys.executable, str(REPO / "bench" / "prefill.py"), "--model", str(tiny_model_dir),
           "--lens", "7,19,4", "--new-tokens", "5", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"] for r in rows] == ["grpo_step", "eval_batch"]
    assert [r["rows_equal"] for r in rows] == ["24 of 24", "3 of 3"]  # 3 prompts x 8 sampled; x 1 greedy
    for r in rows:
        assert r["lens"] == [7, 19, 4] and r["batch"]["cpu_s"] > 0 and r["each"]["cpu_s"] > 0
    assert "batch/each CPU" in done.stdout
