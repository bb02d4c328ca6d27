"""verl's tool config and the agentic rows of `tooltune data export --format verl`, as verl 0.9.1 reads
them (its own classes read them in `make verl-check`, scripts/verl_check.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tooltune.data.export import export, to_verl_rows, tool_config_path
from tooltune.data.synthetic.chain_tasks import generate_chain_tasks
from tooltune.integrations.verl.config import (
    AGENT_NAME,
    SINGLE_TURN_AGENT,
    TOOL_CLASS,
    tool_config,
    verl_parameters,
)
from tooltune.schema import Sample, ToolCall, ToolSpec, write_jsonl


def test_parameters_keep_what_verl_reads_and_describe_the_rest():
    params = verl_parameters({"type": "object", "required": ["when", "gone"], "properties": {
        "when": {"type": "string", "description": "A  date.", "enum": ["today", "tomorrow"]},
        "who": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "anything": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}})
    props = params["properties"]
    assert props["when"] == {"type": "string", "description": "A date.", "enum": ["today", "tomorrow"]}
    assert props["who"]["type"] == "array" and '"name"' in props["who"]["description"]
    assert "null" in props["anything"]["type"] and "anyOf" in props["anything"]["description"]
    assert params["required"] == ["when"]  # a required name without a property is dropped


def test_tool_config_declares_each_tool_once_with_its_environment():
    tasks = generate_chain_tasks(4, seed=0, split="train")
    config = tool_config(tasks)
    names = [t["tool_schema"]["function"]["name"] for t in config["tools"]]
    assert sorted(names) == sorted({s.name for t in tasks for s in t.tools})
    first = config["tools"][0]
    assert first["class_name"] == TOOL_CLASS
    assert first["config"] == {"type": "native", "environment": "synthetic_chain"}
    assert first["tool_schema"]["type"] == "function"


def test_an_export_of_tasks_is_agentic_and_writes_the_tool_config(tmp_path: Path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    tasks = generate_chain_tasks(3, seed=0, split="train")
    plain = Sample("plain-1", "test", "simple", [{"role": "user", "content": "hi"}],
                   [ToolSpec("f", "", {"type": "object", "properties": {}})], [ToolCall("f", {})])
    jsonl, out = tmp_path / "tasks.jsonl", tmp_path / "tasks.parquet"
    write_jsonl([*tasks, plain], str(jsonl))
    assert export([str(jsonl)], "verl", str(out), "native") == 4
    rows = pq.read_table(out).to_pylist()
    assert [r["agent_name"] for r in rows] == [AGENT_NAME] * 3 + [SINGLE_TURN_AGENT]
    info = rows[0]["extra_info"]
    assert json.loads(info["tools_kwargs"]["tooltune"]["create_kwargs"]["task"])["id"] == tasks[0].id
    assert info["tool_selection"] == [t.name for t in tasks[0].tools] and info["need_tools_kwargs"]
    assert rows[3]["extra_info"]["tools_kwargs"] == {"tooltune": None}
    config = yaml.safe_load(Path(tool_config_path(str(out))).read_text())
    assert config == tool_config(tasks)
    # an export without tasks is unchanged: no agent fields
    assert "agent_name" not in to_verl_rows([plain])[0]


def test_the_cli_says_where_the_tool_config_went(tmp_path: Path, capsys: pytest.CaptureFixture):
    pytest.importorskip("pyarrow")
    from tooltune.cli import main

    jsonl = tmp_path / "train.jsonl"
    write_jsonl(generate_chain_tasks(2, seed=0, split="train"), str(jsonl))
    assert main(["data", "export", "--input", str(jsonl), "--format", "verl", "--out", str(tmp_path / "v"),
                 "--template", "native"]) == 0
    out = capsys.readouterr().out
    assert f"wrote verl's tool config to {tmp_path / 'v' / 'train.tools.yaml'}" in out
