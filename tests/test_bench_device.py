"""bench/device: the real recipe with its evaluations in a second process, and the offline bfcl-eval shim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tooltune.cli import main

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "configs" / "quickstart_real_smollm2_mini.yaml"
SCRIPT = REPO / "bench" / "device" / "real_recipe.py"
STAGES = ("data", "model", "eval_base", "sft", "eval_sft", "screen", "grpo", "eval_grpo", "sft_continued",
          "eval_sft_continued")


def _settings(model: Path, data: Path) -> list[str]:
    return ["--model", str(model), "--benchmarks.data_dir", str(data), "--real_data.eval_data", str(data)]


def _script(out: Path, model: Path, data: Path, *extra: str) -> subprocess.CompletedProcess:
    sets = [x for k, v in zip(*[iter(_settings(model, data))] * 2) for x in ("--set", f"{k[2:]}={v}")]
    command = [sys.executable, str(SCRIPT), "--config", str(MINI), "--out", str(out), *sets, *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)


def _verdicts(run: Path) -> dict[str, str]:
    return {str(f.relative_to(run)): f.read_text() for f in sorted((run / "evals").rglob("verdicts.jsonl"))}


def _entry_ids(verdicts: str) -> list[str]:
    return [json.loads(line)["id"] for line in verdicts.splitlines() if line.strip()]


def _untimed(value: object) -> object:
    """A stage result without its clock and memory readings (seconds, times, load, peak resident memory),
    which differ run to run."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items()
                if not (k.endswith(("_s", "_mb")) or "time" in k or k in ("t", "loadavg_end", "steps_per_s"))}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def test_two_processes_give_the_quickstarts_stages_and_verdicts(tmp_path: Path, tiny_model_dir: Path,
                                                                shared_data_dir: Path) -> None:
    ordered, split = tmp_path / "ordered", tmp_path / "split"
    assert main(["quickstart", "--config", str(MINI), "--out", str(ordered),
                 *_settings(tiny_model_dir, shared_data_dir)]) == 0
    done = _script(split, tiny_model_dir, shared_data_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[train]" in done.stdout and "[eval]" in done.stdout and "train exit 0, eval exit 0" in done.stdout
    assert all((split / "stages" / f"{s}.json").is_file() for s in STAGES)
    # the same stages, seeded by their place in the recipe: the same answers and verdicts as one process.
    # Continued SFT trains for GRPO's measured CPU time (`clock: cpu`), so its step count, its loss and
    # the answers of its checkpoint may differ by a step between runs: there only the entries scored match.
    ordered_verdicts, split_verdicts = _verdicts(ordered), _verdicts(split)
    assert sorted(split_verdicts) == sorted(ordered_verdicts) and len(split_verdicts) == 12
    for name, text in split_verdicts.items():
        if name.startswith("evals/sft_continued/"):
            assert _entry_ids(text) == _entry_ids(ordered_verdicts[name]), name
        else:
            assert text == ordered_verdicts[name], name
    for stage in ("sft", "grpo"):
        a, b = (_untimed(json.loads((r / "stages" / f"{stage}.json").read_text())) for r in (ordered, split))
        assert a == b, stage
    a, b = (json.loads((r / "stages" / "sft_continued.json").read_text()) for r in (ordered, split))
    assert a["clock"] == b["clock"] == "cpu" and a["steps"] >= 1 and b["steps"] >= 1
    report = json.loads((split / "report.json").read_text())
    assert list(report["scores"]) == ["base", "sft", "grpo", "sft_continued"]


def test_the_report_role_writes_the_report_of_a_run_cut_short(tmp_path: Path, tiny_model_dir: Path,
                                                             shared_data_dir: Path) -> None:
    out = tmp_path / "run"
    assert main(["quickstart", "--config", str(MINI), "--out", str(out), "--stop-after", "model",
                 *_settings(tiny_model_dir, shared_data_dir)]) == 0
    (out / "report.json").unlink()
    done = _script(out, tiny_model_dir, shared_data_dir, "--role", "report")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["scores"] == {} and not (out / "stages" / "sft.json").exists()


def test_the_shim_gives_bfcl_evals_checker_the_flags_of_tooltunes_model_keys() -> None:
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING

    from tooltune.evaluation.bfcl.scoring import NAME_STYLES

    table = json.loads((REPO / "bench" / "device" / "bfcl_model_config.json").read_text())
    assert set(table) == set(NAME_STYLES.values())
    for key, fields in table.items():  # written from the real module: the same flag the checker reads
        assert fields["underscore_to_dot"] == MODEL_CONFIG_MAPPING[key].underscore_to_dot
    code = ("import sys; from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker; "
            "from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING as m; "
            "print(sorted(m), 'anthropic' in sys.modules)")  # the checker without any provider client
    shimmed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(REPO / "bench" / "device" / "site")})
    assert shimmed.returncode == 0, shimmed.stderr
    assert shimmed.stdout.strip().splitlines()[-1] == f"{sorted(table)} False"
