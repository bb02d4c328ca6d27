"""`tooltune eval mcp`: a model's episode success on MCP task files through the runner, the self-check
and the command line, with the same summary as every benchmark; a failed verdict says which check."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from tooltune.cli import main  # noqa: E402
from tooltune.data.mcp_tasks import task_from_record  # noqa: E402
from tooltune.environments.mcp.client import POOL, McpConnection, close_all  # noqa: E402
from tooltune.environments.mcp.data import McpServer  # noqa: E402
from tooltune.evaluation.benchmark import BENCHMARKS, MissingCapability, ProvidesAceGold  # noqa: E402
from tooltune.evaluation.controls import Controls  # noqa: E402
from tooltune.evaluation.options import EvalOptions  # noqa: E402
from tooltune.evaluation.r2if_ace import ace_set  # noqa: E402
from tooltune.evaluation.runner import evaluate  # noqa: E402
from tooltune.evaluation.scripted import ground_truth_policy  # noqa: E402
from tooltune.generation import Sampling, ScriptedBackend  # noqa: E402
from tooltune.prompts import render_answer  # noqa: E402
from tooltune.schema import ToolCall  # noqa: E402

SERVER = McpServer.parse([sys.executable, "-m", "tooltune.environments.mcp.notes"])
ADD = {"name": "add_note", "arguments": {"title": "groceries", "text": "milk"}}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two task files of the notes server, written as `tooltune data tasks mcp` writes them."""
    conn = McpConnection(SERVER).start()
    tools = conn.list_tools()
    conn.close()
    folder = tmp_path_factory.mktemp("mcp")
    records = {
        "notes": [{"id": "save", "prompt": "Save a note groceries: milk", "reset": {"tool": "reset_notes"},
                   "check": {"kind": "calls", "calls": [ADD], "ignore": ["list_notes", "get_note"]}},
                  {"id": "save-and-say", "prompt": "Save groceries: milk and say saved",
                   "check": [{"kind": "calls", "calls": [ADD]}, {"kind": "answer", "contains": ["saved"]}]}],
        "state": [{"id": "state", "prompt": "Save groceries: milk",
                   "check": {"kind": "result", "equals": {"title": "groceries", "text": "milk", "tags": []},
                             "call": {"name": "get_note", "arguments": {"title": "groceries"}}},
                   "answer": [ADD]}],
    }
    for name, rows in records.items():
        lines = [json.dumps(task_from_record(r, SERVER, tools).to_dict()) for r in rows]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(autouse=True)
def no_servers_left() -> None:
    yield
    POOL.clear()
    close_all()


def test_the_self_check_solves_every_task_and_the_summary_counts_per_file(data_dir: Path, tmp_path: Path):
    perfect = ScriptedBackend(ground_truth_policy("mcp", data_dir=data_dir), name="scripted")
    summary = evaluate("mcp", [(0, perfect)], EvalOptions(
        out=tmp_path / "run", data_dir=data_dir, show_progress=False,
        sampling=Sampling(temperature=0.0, batch_size=4)))
    scores = summary["scores"]
    assert scores["overall"] == 1.0
    assert scores["categories.notes.correct"] == 2 and scores["categories.notes.total"] == 2
    assert scores["categories.state.accuracy"] == 1.0 and scores["categories.state.total"] == 1


def test_a_model_that_calls_nothing_fails_every_task_saying_which_check(data_dir: Path, tmp_path: Path):
    silent = ScriptedBackend(lambda r: render_answer([], "tool_n1"), name="silent")
    summary = evaluate("mcp", [(0, silent)], EvalOptions(
        out=tmp_path / "run", data_dir=data_dir, show_progress=False, categories="notes"))
    assert summary["scores"]["overall"] == 0.0
    assert {k.split(".")[1] for k in summary["scores"] if k.startswith("categories.")} == {"notes"}
    verdicts = [json.loads(line) for line in (tmp_path / "run" / "verdicts.jsonl").read_text().splitlines()]
    assert verdicts and all(v["error"].startswith("calls: missing=") for v in verdicts)
    wrong = ScriptedBackend(lambda r: render_answer([ToolCall("delete_note", {"title": "x"})], "tool_n1")
                            if r.meta["step"] == 0 else render_answer([], "tool_n1"))
    out = evaluate("mcp", [(0, wrong)], EvalOptions(
        out=tmp_path / "wrong", data_dir=data_dir, show_progress=False))
    assert out["scores"]["overall"] == 0.0


def test_eval_mcp_on_the_command_line_and_its_errors(data_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]):
    assert main(["eval", "mcp", "--scripted", "--data-dir", str(data_dir), "--out", str(tmp_path / "cli"),
                 "--report", "false"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"] == 1.0
    bench = BENCHMARKS["mcp"]
    with pytest.raises(ValueError, match=r"no task file for \['nope'\]"):
        bench.prepare("nope", Controls(), data_dir)
    assert not isinstance(bench, ProvidesAceGold)
    with pytest.raises(MissingCapability, match="benchmark 'mcp' has no ACE gold.*bfcl, apibank, acebench"):
        ace_set("mcp", None, Controls(), data_dir)
    with pytest.raises(MissingCapability, match="benchmark 'mcp' has no simulated-user entries"):
        evaluate("mcp", [(0, ScriptedBackend(lambda r: ""))], EvalOptions(
            out=tmp_path / "user", data_dir=data_dir, user_backend=ScriptedBackend(lambda r: "", name="user"),
            show_progress=False))
