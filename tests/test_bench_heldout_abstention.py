"""bench/heldout_abstention.py: the validation split by part (calls, no call, irrelevance variants of the
single-turn calls), each checkpoint's greedy hits per part, kept across reruns."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import bench_module

from tooltune.experiment.config import load_config
from tooltune.experiment.pipeline import Pipeline
from tooltune.experiment.real import real_profile
from tooltune.schema import Sample, write_jsonl

MINI = Path(__file__).resolve().parents[1] / "configs" / "quickstart_real_smollm2_mini.yaml"
TOOLS = [{"name": "get_weather", "description": "weather of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
         {"name": "get_time", "description": "time in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


def _val() -> list[Sample]:
    call = [{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    user = [{"role": "user", "content": "Weather in Oslo?"}]
    history = [*user, {"role": "assistant", "content": "",
                       "tool_calls": [{"name": "get_time", "arguments": {"city": "Oslo"}}]},
               {"role": "tool", "content": "12:00", "name": "get_time"}]
    return [
        Sample("a", "test", "multiple", user, TOOLS, call),
        Sample("b", "test", "irrelevance", user, TOOLS, []),
        Sample("c", "test", "multi_step", history, TOOLS, call),  # not single-turn: no variant
        Sample("d", "test", "simple", user, TOOLS[:1], call),  # no tool would remain: no variant
    ]


def test_the_parts_and_the_variants() -> None:
    parts = bench_module("heldout_abstention").held_out(_val())
    assert [s.id for s in parts["calls"]] == ["a", "c", "d"]
    assert [s.id for s in parts["no call"]] == ["b"]
    [variant] = parts["variants"]
    assert variant.id == "a#irrelevant" and variant.answer == []
    assert [t.name for t in variant.tools] == ["get_time"]


@pytest.mark.parametrize("spec", ["sft", "sft=runs/real42", "=runs/real42:sft", "sft=:sft"])
def test_a_checkpoint_spec_without_its_parts_is_named(spec: str) -> None:
    with pytest.raises(ValueError, match="expected LABEL=RUN:NAME"):
        bench_module("heldout_abstention").parse_checkpoint(spec)


def test_each_checkpoint_scored_once_and_paired_with_the_first(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    run = tmp_path / "run"
    Pipeline(run, load_config(MINI, ["--model", str(tiny_model_dir)]), profile=real_profile())  # its run.json
    (run / "data").mkdir()
    for split in ("train", "val", "unseen_tools"):  # the run's splits; only val is read
        write_jsonl(_val() if split == "val" else _val()[:1], str(run / "data" / f"{split}.jsonl"))
    for name in ("sft", "grpo_like"):
        shutil.copytree(tiny_model_dir, run / "models" / name)
    out = tmp_path / "abstention.json"
    mod = bench_module("heldout_abstention")
    argv = ["heldout_abstention.py", "--run", str(run), "--out", str(out),
            "--checkpoint", f"sft={run}:sft", "--checkpoint", f"other={run}:grpo_like"]
    monkeypatch.setattr(sys, "argv", argv)
    mod.main()
    res = json.loads(out.read_text())
    assert res["n"] == {"calls": 3, "no call": 1, "variants": 1}
    for label in ("sft", "other"):
        hits = res["checkpoints"][label]["hits"]
        assert {k: len(v) for k, v in hits.items()} == res["n"]
        assert all(h in (0.0, 1.0) for v in hits.values() for h in v)
    table = capsys.readouterr().out
    assert "| sft | " in table and "| other | " in table and "z " in table.split("| other |")[1]
    # a rerun scores nothing again: the file's checkpoints are kept
    monkeypatch.setattr("tooltune.experiment.measure.greedy", lambda *a, **k: pytest.fail("scored again"))
    mod.main()
    assert json.loads(out.read_text())["checkpoints"] == res["checkpoints"]
    # the run's folder spelled another way is the same run
    monkeypatch.setattr(sys, "argv", [a.replace(str(run), str(run / ".." / "run")) for a in argv])
    mod.main()
    # the same label on another checkpoint, or the file of another run, is refused before any scoring
    swapped = [*argv[:-2], "--checkpoint", f"other={run}:sft"]
    monkeypatch.setattr(sys, "argv", swapped)
    with pytest.raises(SystemExit, match="'other' was scored on .*grpo_like"):
        mod.main()
    res["run"] = "runs/elsewhere"
    out.write_text(json.dumps(res))
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit, match="runs/elsewhere"):
        mod.main()
