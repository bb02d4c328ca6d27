"""`tooltune quickstart --branch-from`: a GRPO ablation from another run's warm start, on the synthetic
mini quickstart (seconds): the shared stages are that run's files, GRPO runs with the new reward, and
every refusal comes before the output folder is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tooltune.cli import main
from tooltune.config import ConfigError
from tooltune.experiment.branch import plan_branch
from tooltune.experiment.config import load_config
from tooltune.experiment.pipeline import Pipeline
from tooltune.experiment.synthetic import STAGES, synthetic_profile

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "configs" / "quickstart_mini.yaml"
FINE = "{fine_grained: 1.0, binary: 0.0}"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mini quickstart run finished up to the branch point (its warm start and its evaluation)."""
    out = tmp_path_factory.mktemp("branch") / "binary"
    Pipeline(out, load_config(MINI, {"threads": 1}), say=lambda s: None).run(stop_after="eval_sft")
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def test_a_branch_shares_the_warm_start_and_trains_grpo_with_its_own_reward(
    source: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "fine"
    for later in ("models/sft_continued_progress", "evals/grpo"):  # what a finished source would also hold
        (source / later).mkdir(parents=True, exist_ok=True)
        (source / later / "state.pt").write_bytes(b"not the branch's")
    args = ["quickstart", "--config", str(MINI), "--threads", "1", "--out", str(out),
            "--branch-from", str(source), "--train.reward.components", FINE, "--stop-after", "eval_grpo"]
    assert main(args) == 0
    said = capsys.readouterr().out
    shared = STAGES[: STAGES.index("grpo")]
    assert "tooltune quickstart: Branch of" in said
    assert "train.reward.components.fine_grained: missing vs 1.0" in said
    assert said.count("already finished, skipping") == len(shared)  # none of the shared stages is redone
    assert "reward components (weights): {'fine_grained': 1.0, 'binary': 0.0}" in said
    # the shared stages are the source's: same data, same warm start (hard links), same results
    for folder in ("data", "models/sft", "models/base"):
        assert _files(out / folder) == _files(source / folder), folder
    assert not (out / "models/sft_continued_progress").exists() and not (out / "evals/grpo/state.pt").exists()
    assert (out / "models/sft/model.safetensors").samefile(source / "models/sft/model.safetensors")
    for stage in shared:
        ours, theirs = (json.loads((d / "stages" / f"{stage}.json").read_text()) for d in (out, source))
        assert json.dumps(ours) == json.dumps(theirs).replace(str(source.resolve()), str(out.resolve()))
        assert str(source) not in json.dumps(ours)  # the branch reads nothing from the source later
    # GRPO ran here, from the shared warm start, scored by the fine-grained reward (binary logged at 0)
    metrics = [json.loads(x) for x in (out / "grpo" / "metrics.jsonl").read_text().splitlines()]
    logged = {k for m in metrics for k in m}
    assert {"rewards/fine_grained/mean", "rewards/binary/mean"} <= logged
    assert not (source / "grpo").exists() and (out / "stages" / "eval_grpo.json").is_file()
    md = (out / "report.md").read_text()
    assert f"Branch of {source.resolve()}: stages {', '.join(shared)} are that run's" in md
    # running the same command again resumes the branch
    assert main(args) == 0
    assert capsys.readouterr().out.count("already finished, skipping") == len(shared) + 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"seed": 1}, r"only the settings under train.reward, train.grpo, train.filter, train.downsample, "
                     r"screen and train.diagnostics.eval_every may differ .* seed: 0 vs 1"),
        ({"train.sft.learning_rate": 1.0},
         r"1 differ, the source's value vs this run's: train.sft.learning_rate"),
        ({}, "this run's settings equal that run's; resume it with --out"),
    ],
)
def test_settings_the_shared_stages_read_are_refused_before_anything_is_written(
    source: Path, tmp_path: Path, capsys, overrides: dict, message: str
) -> None:
    out = tmp_path / "refused"
    flags = [x for k, v in overrides.items() for x in (f"--{k}", str(v))]
    assert main(["quickstart", "--config", str(MINI), "--threads", "1", "--out", str(out),
                 "--branch-from", str(source), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--branch-from" in err[0]
    assert re.search(message, err[0]), err[0]
    assert not out.exists()


def test_a_source_without_a_warm_start_or_a_run_is_refused(source: Path, tmp_path: Path) -> None:
    cfg = load_config(MINI, {"threads": 1, "train.reward.components": FINE})
    early = tmp_path / "early"
    Pipeline(early, load_config(MINI, {"threads": 1}), say=lambda s: None).run(stop_after="model")
    with pytest.raises(ConfigError, match=r"stage\(s\) sft not finished there; finish them first"):
        plan_branch(early, tmp_path / "a", cfg, synthetic_profile())
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="not a quickstart run folder"):
        plan_branch(tmp_path / "plain", tmp_path / "b", cfg, synthetic_profile())
    with pytest.raises(ConfigError, match="already holds stages of its own run"):
        plan_branch(source, early, cfg, synthetic_profile())
    with pytest.raises(ConfigError, match="the source is the output folder itself"):
        plan_branch(source, source, cfg, synthetic_profile())
