"""`tooltune data …` end to end through the CLI dispatcher."""

from __future__ import annotations

import json
from pathlib import Path

from tooltune.cli import main


def run(cmd: str) -> int:
    return main(cmd.split())


def test_synth_prepare_validate_export_select(tmp_path: Path, capsys):
    raw, out = tmp_path / "xlam.jsonl", tmp_path / "prep"
    assert run(f"data synth --n 200 --out {raw} --format xlam --seed 1") == 0
    assert run(f"data prepare --source xlam --input {raw} --out {out} --val-fraction 0.2 "
               "--irrelevance-augment 0.1 --no-progress") == 0
    printed = capsys.readouterr().out
    assert "xlam" in printed and "total" in printed
    stats = json.loads((out / "stats.json").read_text())
    assert stats["sources"]["xlam"]["records_in"] == 200
    assert run(f"data validate {out} --template r2if") == 0
    assert "score 1.0" in capsys.readouterr().out
    assert run(f"data export --input {out}/train.jsonl --format verl --out {tmp_path}/t.parquet") == 0
    assert run(f"data select --recipe balanced --input {out}/train.jsonl --out {tmp_path}/bal.jsonl") == 0
    assert (tmp_path / "bal.jsonl").read_text().count("\n") % 5 == 0


def test_toolace_and_bfcl_sources_from_cli(tmp_path: Path):
    raw, out = tmp_path / "toolace.jsonl", tmp_path / "prep"
    assert run(f"data synth --n 50 --out {raw} --format toolace") == 0
    assert run(f"data prepare --source toolace --input {raw} --source bfcl --out {out} --no-call-samples "
               "--no-dedupe --limit 300 --no-progress") == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["sources"]["bfcl"]["records_in"] == 300  # --limit counts records per source
    assert run(f"data validate {out}") == 0


def test_validate_lists_failures_and_fails(tmp_path: Path, capsys):
    # "f(x)" cannot be written as a Python call, so the python grammar cannot read this answer back
    bad = {"id": "s1", "source": "x", "category": "simple", "messages": [{"role": "user", "content": "q"}],
           "tools": [{"name": "f(x)", "parameters": {}}], "answer": [{"name": "f(x)", "arguments": {"a": 1}}]}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(bad) + "\n")
    assert run(f"data validate {path} --template python") == 1
    assert "FAIL" in capsys.readouterr().out


def test_malformed_file_exits_nonzero_naming_line(tmp_path: Path, capsys):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"query": "q", "answers": "[]", "tools": "[]"}\n{nope\n')
    assert run(f"data prepare --source xlam --input {path} --out {tmp_path}/o --no-progress") == 1
    assert "broken.jsonl:2" in capsys.readouterr().err
    assert run(f"data prepare --source xlam --out {tmp_path}/o") == 1


def test_prepare_from_yaml_config_with_override(tmp_path: Path):
    raw = tmp_path / "x.jsonl"
    assert run(f"data synth --n 40 --out {raw} --format xlam") == 0
    cfg = tmp_path / "prep.yaml"
    cfg.write_text(f"sources:\n  - [xlam, {raw}]\nout: {tmp_path}/from_yaml\nval_fraction: 0.5\nseed: 3\n"
                   "progress: false\n")
    assert run(f"data prepare --config {cfg} --seed 7") == 0
    saved = json.loads((tmp_path / "from_yaml" / "stats.json").read_text())["config"]
    assert saved["val_fraction"] == 0.5 and saved["seed"] == 7 and saved["sources"] == [["xlam", str(raw)]]


def test_select_difficulty_with_replay_backend(tmp_path: Path, capsys):
    from tooltune.prompts import render_answer
    from tooltune.schema import read_jsonl

    data = tmp_path / "s.jsonl"
    assert run(f"data synth --n 30 --out {data}") == 0
    samples = read_jsonl(str(data))
    preds = tmp_path / "preds.jsonl"
    # a replayed policy gives the same text k times: right on even samples, "[]" (no call) on odd ones
    preds.write_text("".join(json.dumps({"id": s.id, "result": render_answer(s.answer if i % 2 == 0 else [])})
                             + "\n" for i, s in enumerate(samples)))
    out = tmp_path / "kept.jsonl"
    assert run(f"data select --recipe difficulty --input {data} --out {out} --predictions {preds} --k 2") == 0
    stats = json.loads(capsys.readouterr().out.splitlines()[-2])
    assert stats["kept"] == 0 and stats["in"] == 30  # a replay is always or never right
    assert len((tmp_path / "kept.rejected.jsonl").read_text().splitlines()) == 30


def test_select_difficulty_needs_exactly_one_backend(tmp_path: Path, capsys):
    data = tmp_path / "s.jsonl"
    assert run(f"data synth --n 3 --out {data}") == 0
    capsys.readouterr()
    assert run(f"data select --recipe difficulty --input {data} --out {tmp_path}/k.jsonl") == 2
    err = capsys.readouterr().err
    assert "--model" in err and "--endpoint" in err and "--predictions" in err and "got none" in err
    assert run(f"data select --recipe difficulty --input {data} --out {tmp_path}/k.jsonl "
               f"--predictions {data} --model m") == 2
    assert "got model and predictions" in capsys.readouterr().err


def test_select_difficulty_with_an_endpoint_uses_the_eval_backend_flags(tmp_path: Path, capsys):
    from test_generation_backends import _FakeServer

    data = tmp_path / "s.jsonl"
    assert run(f"data synth --n 4 --out {data}") == 0
    capsys.readouterr()
    with _FakeServer() as server:
        rc = run(f"data select --recipe difficulty --input {data} --out {tmp_path}/k.jsonl --k 2 "
                 f"--no-progress --endpoint {server.url} --model-name served --concurrency 2 "
                 "--temperature 0.5")
    assert rc == 0
    stats = json.loads(capsys.readouterr().out.splitlines()[-2])
    assert stats == {**stats, "in": 4, "kept": 0, "rejected": {"never_solved": 4}}  # the server only echoes
    assert len(server.bodies) == 8 and {b["model"] for b in server.bodies} == {"served"}
    assert {b["temperature"] for b in server.bodies} == {0.5}
