"""`tooltune data …` end to end through the CLI dispatcher, and the user mistakes each command refuses
before any work with one line naming the option (and status 2)."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from test_cli import one_error_line, run_cli

from tooltune.cli import main


def run(cmd: str) -> int:
    """The command's exit status, as the shell sees it (argparse's own errors exit through SystemExit)."""
    return run_cli(cmd.split())


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    return one_error_line(capsys)


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


def test_unusable_file_exits_nonzero_naming_line(tmp_path: Path, capsys):
    path = tmp_path / "broken.jsonl"
    path.write_bytes(b"\xc6\x00binary\xff" * 50)
    assert run(f"data prepare --source xlam --input {path} --out {tmp_path}/o --no-progress") == 2
    assert "broken.jsonl:1" in _one_line(capsys)
    assert run(f"data prepare --source xlam --out {tmp_path}/o") == 2
    assert "--source xlam: needs an --input" in _one_line(capsys)


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
    err = _one_line(capsys)
    assert "--model" in err and "--endpoint" in err and "--predictions" in err and "got none" in err
    assert run(f"data select --recipe difficulty --input {data} --out {tmp_path}/k.jsonl "
               f"--predictions {data} --model m") == 2
    assert "got model and predictions" in _one_line(capsys)
    assert not (tmp_path / "k.jsonl").exists()


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



# ------------------------------------------------------------------------------------ user mistakes


@pytest.fixture
def synth(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    assert run(f"data synth --n 6 --out {path}") == 0
    return path


def test_readme_first_command_creates_the_parent_folders(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert run("data synth --out runs/data/synth.jsonl --n 5") == 0
    assert (tmp_path / "runs" / "data" / "synth.jsonl").read_text().count("\n") == 5
    assert run("data export --input runs/data/synth.jsonl --format verl --out runs/verl/new/t.parquet") == 0
    assert (tmp_path / "runs" / "verl" / "new" / "t.parquet").is_file()


def _unwritable_outs(tmp_path: Path) -> list[str]:
    (tmp_path / "some_file.txt").write_text("x")
    outs = [f"{tmp_path}/some_file.txt/sub/out.jsonl"]
    return outs + (["/proc/x/out.jsonl"] if Path("/proc/self").is_dir() else [])


@pytest.mark.parametrize(
    "command",
    [
        "data synth --n 3 --out {out}",
        "data prepare --source jsonl --input {data} --out {out} --no-progress",
        "data export --input {data} --format jsonl --out {out}",
        "data export --input {data} --format hf --out {out}",
        "data select --recipe balanced --input {data} --out {out}",
        "data select --recipe difficulty --input {data} --out {out} --predictions {data}",
    ],
)
def test_every_out_refuses_a_place_it_cannot_write(tmp_path: Path, synth: Path, capsys, command: str) -> None:
    for out in _unwritable_outs(tmp_path):
        assert run(command.format(out=out, data=synth)) == 2
        line = _one_line(capsys)
        assert line.startswith(f"tooltune data {command.split()[1]}: --out {out}: "), line
        assert "is a file, not a folder" in line or "cannot write there" in line


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("data validate {data} --template nosuch", "--template: unknown template or grammar 'nosuch'"),
        ("data validate {data} --template tool_n2",
         "--template: unknown template or grammar 'tool_n2' (did you mean tool_n1"),
        ("data export --input {data} --format jsonl --out {tmp}/o.jsonl --template bfcl_strng",
         "--template: unknown template 'bfcl_strng' (did you mean bfcl_strong"),
        ("data export --input {data} --format jsonl --out {tmp}/o.jsonl --system-prompt tool_n2",
         "--system-prompt: 'tool_n2' is not a template name (did you mean tool_n1"),
        ("data select --recipe difficulty --input {data} --out {tmp}/k.jsonl --predictions {data} "
         "--template r2iff", "template: unknown template 'r2iff' (did you mean r2if?)"),
        ("data prepare --source xlma --input {data} --out {tmp}/p",
         "--source: unknown source 'xlma' (did you mean xlam?)"),
        ("data synth --out {tmp}/s2.jsonl --categories simple,paralel",
         "--categories: unknown category 'paralel' (did you mean parallel"),
    ],
)
def test_unknown_names_are_refused_with_the_closest(tmp_path: Path, synth: Path, capsys, command: str,
                                                    message: str) -> None:
    assert run(command.format(data=synth, tmp=tmp_path)) == 2
    assert message in _one_line(capsys)
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "p").exists()


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("data synth --n -5 --out {tmp}/n.jsonl", "n: must be >= 1, got -5"),
        ("data synth --n 5 --transform-rate 1.5 --out {tmp}/n.jsonl",
         "transform_rate: must be in [0, 1], got 1.5"),
        ("data prepare --source jsonl --input {data} --out {tmp}/p --val-fraction 1.5",
         "val_fraction: must be in [0, 1), got 1.5"),
        ("data prepare --source jsonl --input {data} --out {tmp}/p --val-fraction 1",
         "val_fraction: must be in [0, 1), got 1.0"),
        ("data prepare --source jsonl --input {data} --out {tmp}/p --limit -1",
         "limit: must be >= 0, got -1"),
        ("data prepare --source jsonl --input {data} --out {tmp}/p --check-arguments strikt",
         "--check-arguments/--check_arguments: invalid choice: 'strikt'"),
        ("data select --recipe difficulty --input {data} --out {tmp}/k.jsonl --predictions {data} --k 0",
         "k: must be >= 1, got 0"),
        ("data select --recipe difficulty --input {data} --out {tmp}/k.jsonl --predictions {data} "
         "--temperature -1", "temperature: must be >= 0, got -1.0"),
        ("data select --recipe difficulty --input {data} --out {tmp}/k.jsonl --model m --timeout 0",
         "timeout: must be > 0, got 0.0"),
        ("data select --recipe balanced --input {data} --out {tmp}/k.jsonl --per-category 0",
         "--per-category: must be >= 1, got 0"),
    ],
)
def test_values_out_of_range_are_refused(tmp_path: Path, synth: Path, capsys, command: str,
                                         message: str) -> None:
    assert run(command.format(data=synth, tmp=tmp_path)) == 2
    assert message in _one_line(capsys)
    assert not (tmp_path / "n.jsonl").exists() and not (tmp_path / "p").exists()
    assert not (tmp_path / "k.jsonl").exists()


def test_binary_garbage_is_named_by_file_and_line(tmp_path: Path, synth: Path, capsys) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(255, -1, -1)) * 16)
    for command in (f"data validate {garbage}", f"data export --input {garbage} --format jsonl --out "
                    f"{tmp_path}/o.jsonl", f"data select --recipe balanced --input {garbage} --out "
                    f"{tmp_path}/k.jsonl"):
        assert run(command) == 2
        assert f"{garbage}:1: not valid UTF-8" in _one_line(capsys)
    assert run(f"data select --recipe difficulty --input {synth} --out {tmp_path}/k.jsonl "
               f"--predictions {garbage}") == 2
    assert f"predictions: {garbage}:1: not valid UTF-8" in _one_line(capsys)


def test_missing_files_are_named(tmp_path: Path, synth: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cases = [
        ("data validate nope.jsonl", "tooltune data validate: path: not found: nope.jsonl"),
        (f"data validate {tmp_path}",
         f"tooltune data validate: path: {tmp_path} holds no train.jsonl or val.jsonl"),
        ("data export --input nope.jsonl --format jsonl --out o.jsonl",
         "tooltune data export: --input: file not found: nope.jsonl"),
        ("data select --recipe balanced --input nope.jsonl --out k.jsonl",
         "tooltune data select: --input: file not found: nope.jsonl"),
        ("data prepare --source xlam --input nope.jsonl --out p",
         "tooltune data prepare: --input: not found: nope.jsonl"),
        (f"data select --recipe difficulty --input {synth} --out k.jsonl --predictions nope.jsonl",
         "tooltune data select: predictions: file not found: nope.jsonl"),
        (f"data select --recipe difficulty --input {synth} --out k.jsonl --model ./nomodel",
         "tooltune data select: model: model folder not found: ./nomodel"),
    ]
    for command, message in cases:
        assert run(command) == 2, command
        assert _one_line(capsys).startswith(message)
    assert not any(p.exists() for p in (tmp_path / "o.jsonl", tmp_path / "k.jsonl", tmp_path / "p"))


def test_select_refuses_an_unreachable_endpoint_fast(tmp_path: Path, synth: Path, capsys) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    assert run(f"data select --recipe difficulty --input {synth} --out {tmp_path}/k.jsonl --endpoint {url} "
               "--model-name m --retries 0") == 2
    line = _one_line(capsys)
    assert line.startswith(f"tooltune data select: endpoint {url}: cannot connect to 127.0.0.1:")
    assert run(f"data select --recipe difficulty --input {synth} --out {tmp_path}/k.jsonl "
               "--endpoint localhost:8000 --model-name m") == 2
    assert "endpoint: expected an http(s) URL" in _one_line(capsys)


def test_system_prompt_takes_text_a_file_or_a_template_name(tmp_path: Path, synth: Path) -> None:
    prompt = tmp_path / "prompt"
    prompt.write_text("Use the tools.\n{tools}")
    for value, expected in ((str(prompt), "Use the tools."), ("bfcl_strong", "do your best to finish"),
                            ("You are a tool caller. Tools: {tools}", "You are a tool caller.")):
        assert main(["data", "export", "--input", str(synth), "--format", "hf", "--out", str(tmp_path / "hf"),
                     "--system-prompt", value]) == 0
        from datasets import load_from_disk  # deferred: datasets is heavy

        row = load_from_disk(str(tmp_path / "hf"))[0]
        assert expected in row["prompt"][0]["content"], (value, row["prompt"][0])


def test_export_flags_are_the_prompt_controls(tmp_path: Path, synth: Path) -> None:
    """`data export`'s prompt flags are generated from `PromptControls`: same names, help and choices as
    `tooltune eval`'s, and they render the rows as the library does with the same controls."""
    import dataclasses

    import pyarrow.parquet as pq
    from test_cli import _option_actions, _subparser

    from tooltune import cli
    from tooltune.data.export import to_verl_rows
    from tooltune.prompts import PromptControls
    from tooltune.schema import read_jsonl

    actions = _option_actions(_subparser(cli.build_parser(), "data", "export"))
    for f in dataclasses.fields(PromptControls):
        flag = "--" + f.name.replace("_", "-")
        assert f.metadata["help"] in actions[flag].help
    assert actions["--history"].choices == ["messages", "context"] and "--no-keep-reasoning" in actions
    out = tmp_path / "t.parquet"
    assert run(f"data export --input {synth} --format verl --out {out} --template r2if --history context "
               "--no-keep-reasoning --system-prompt bfcl_strong") == 0
    controls = PromptControls("r2if", system_prompt="bfcl_strong", history="context", keep_reasoning=False)
    expected = to_verl_rows(read_jsonl(str(synth)), controls)
    rows = pq.read_table(out).to_pylist()
    assert [r["extra_info"]["history"] for r in rows] == ["context"] * len(expected)
    assert [[m["content"] for m in r["prompt"]] for r in rows] == [
        [m["content"] for m in r["prompt"]] for r in expected]


def test_prepare_refuses_to_replace_a_prepared_set_without_overwrite(tmp_path: Path, capsys) -> None:
    raw, out = tmp_path / "xlam.jsonl", tmp_path / "prep"
    assert run(f"data synth --n 40 --out {raw} --format xlam --seed 1") == 0
    assert run(f"data prepare --source xlam --input {raw} --out {out} --no-progress") == 0
    before = (out / "train.jsonl").read_bytes()
    capsys.readouterr()
    assert run(f"data prepare --source xlam --input {raw} --out {out} --seed 7 --no-progress") == 2
    line = _one_line(capsys)
    assert line == (f"tooltune data prepare: --out {out}: already holds a prepared set (train.jsonl, "
                    "val.jsonl, rejected.jsonl, stats.json); pass --overwrite to replace it, or write to "
                    "another folder")
    assert (out / "train.jsonl").read_bytes() == before  # untouched
    again = f"data prepare --source xlam --input {raw} --out {out} --seed 7 --no-progress"
    assert run(f"{again} --overwrite") == 0
    (tmp_path / "empty").mkdir()  # an existing folder without a prepared set is fine
    assert run(f"data prepare --source xlam --input {raw} --out {tmp_path / 'empty'} --no-progress") == 0


def test_verl_export_into_a_folder_writes_a_parquet_file_named_after_the_input(tmp_path: Path, synth: Path,
                                                                              capsys) -> None:
    import pyarrow.parquet as pq

    assert run(f"data export --input {synth} --format verl --out {tmp_path / 'verl'}") == 0
    written = tmp_path / "verl" / f"{synth.stem}.parquet"
    assert pq.read_table(written).num_rows == len(synth.read_text().splitlines())
    assert f"to {written}" in capsys.readouterr().out
    assert run(f"data export --input {synth} --format verl --out {tmp_path / 'x.parquet'}") == 0
    assert (tmp_path / "x.parquet").is_file()
    assert run(f"data export --input {synth} --input {synth} --format verl --out {tmp_path / 'both'}") == 2
    assert "with several --input files give the parquet file's name" in _one_line(capsys)


MCP_NOTES = f"{sys.executable} -m tooltune.environments.mcp.notes"


def test_tasks_mcp_checks_a_task_file_against_the_live_server(tmp_path: Path, capsys):
    pytest.importorskip("mcp")
    add = {"name": "add_note", "arguments": {"title": "groceries", "text": "milk"}}
    lines = [
        {"id": "ok", "prompt": "Save groceries: milk", "answer": [add],
         "check": {"kind": "calls", "calls": [add]}},
        {"id": "offers-unknown", "prompt": "x", "tools": ["add_note", "rm_note"],
         "check": {"kind": "answer", "contains": ["x"]}},
        {"id": "unknown-argument", "prompt": "x", "check": {"kind": "calls", "calls": [
            {"name": "add_note", "arguments": {"title": "a", "body": "b"}}]}},
        {"id": "ok", "prompt": "the same id again", "check": {"kind": "answer", "contains": ["x"]}},
        {"id": "wrong-type", "prompt": "x", "reset": {"tool": "reset_notes"},
         "setup": [{"name": "add_note", "arguments": {"title": "a", "text": 5}}],
         "check": {"kind": "answer", "contains": ["x"]}},
        {"id": "unknown-tool-in-check", "prompt": "x",
         "check": {"kind": "result", "call": {"name": "count_notes", "arguments": {}}, "equals": 0}},
        {"id": "answer-calls-what-is-not-offered", "prompt": "x", "tools": ["list_notes"], "answer": [add],
         "check": {"kind": "answer", "contains": ["x"]}},
        {"id": "ok-2", "prompt": "List my notes", "reset": {"tool": "reset_notes"},
         "check": {"kind": "result", "call": {"name": "list_notes", "arguments": {}}, "equals": []}},
    ]
    path, out = tmp_path / "tasks.jsonl", tmp_path / "out" / "mcp.jsonl"
    text = "\n".join(json.dumps(x) for x in lines[:3]) + "\n\nnot json\n" + "\n".join(
        json.dumps(x) for x in lines[3:]) + "\n"
    path.write_text(text)
    status = run_cli(["data", "tasks", "mcp", "--server", MCP_NOTES, "--tasks", path, "--out", out])
    printed = capsys.readouterr().out.splitlines()
    assert status == 1
    rejected = {int(line.split(":")[1]): line for line in printed if line.startswith(str(path))}
    # line numbers count every line of the file, the blank one included
    assert sorted(rejected) == [2, 3, 5, 6, 7, 8, 9]
    assert "rm_note" in rejected[2] and "unknown argument(s) ['body']" in rejected[3]
    assert "not valid JSON" in rejected[5] and "repeats" in rejected[6]
    assert "setup[0]: add_note: argument text" in rejected[7] and "count_notes" in rejected[8]
    assert "answer[0]" in rejected[9] and "2 task(s) accepted, 7 rejected" in printed[-2]
    from tooltune.environments.mcp import read_task
    from tooltune.schema import read_jsonl

    tasks = read_jsonl(str(out))
    assert [t.id for t in tasks] == ["ok", "ok-2"]
    assert "reset_notes" in tasks[0].tool_names and "reset_notes" not in tasks[1].tool_names
    add_spec = next(t for t in tasks[0].tools if t.name == "add_note")
    assert add_spec.required == ["title", "text"]  # the server's own schema
    assert read_task(tasks[1].meta["env"]).server.command[-1] == "tooltune.environments.mcp.notes"
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(lines[0]) + "\n")
    assert run_cli(["data", "tasks", "mcp", "--server", MCP_NOTES, "--tasks", good]) == 0


def test_tasks_mcp_user_errors(tmp_path: Path, capsys):
    pytest.importorskip("mcp")
    path = tmp_path / "tasks.jsonl"
    path.write_text("{}\n")
    assert run_cli(["data", "tasks", "mcp", "--tasks", path]) == 2
    assert "--server" in _one_line(capsys)
    assert run_cli(["data", "tasks", "mcp", "--server", MCP_NOTES, "--tasks", tmp_path / "none.jsonl"]) == 2
    assert "--tasks" in _one_line(capsys)
    assert run_cli(["data", "tasks", "mcp", "--server", "/nonexistent/server", "--tasks", path]) == 2
    assert "did not start" in _one_line(capsys)
    assert run_cli(["data", "tasks", "mcp", "--server", "'unclosed", "--tasks", path]) == 2
    assert "--server" in _one_line(capsys)
    assert run("data tasks synthetic_chain --n 3") == 2
    assert "--out" in _one_line(capsys)


def test_the_documented_commands_make_the_training_presets_data(tmp_path: Path, monkeypatch) -> None:
    """docs/data.md, "Training data for the presets": its commands, with the Hub ids replaced by local
    files of the same formats (what the page says to do offline), make every data file the presets read."""
    import re
    import shlex

    from tooltune.data.sources import toolace, xlam
    from tooltune.training.config import load_config

    repo = Path(__file__).resolve().parents[1]
    page = (repo / "docs" / "data.md").read_text()
    block = re.search(r"## Training data for the presets\n.*?```bash\n(.*?)```", page, re.S).group(1)
    commands = [c.split("#")[0].strip() for c in block.replace("\\\n", " ").splitlines()]
    commands = [c for c in commands if c.startswith("tooltune ")]
    hub = {f"hf:{xlam.HUB_ID}": tmp_path / "xlam.json", f"hf:{toolace.HUB_ID}": tmp_path / "toolace.json"}
    assert all(any(h in c for c in commands) for h in hub), "the page names both Hub ids the adapters use"
    assert run(f"data synth --n 300 --format xlam --seed 1 --out {hub[f'hf:{xlam.HUB_ID}']}") == 0
    assert run(f"data synth --n 60 --format toolace --seed 1 --out {hub[f'hf:{toolace.HUB_ID}']}") == 0
    monkeypatch.chdir(tmp_path)
    for command in commands:
        argv = [str(hub.get(a, a)) for a in shlex.split(command)[1:]]
        assert run_cli([*argv, "--no-progress"] if argv[:2] == ["data", "prepare"] else argv) == 0, command
    presets = ["tool_n1", "efficient_single_turn", "efficient_multi_turn", "efficient_multi_turn_vanilla",
               "r2if"]
    for name in presets:
        cfg = load_config(repo / "configs" / f"{name}.yaml").check_data_files()
        assert Path(cfg.data.train).read_text().count("\n") > 0, name
