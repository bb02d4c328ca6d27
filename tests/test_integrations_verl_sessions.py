"""Episodes driven through verl's tool lifecycle without verl (`tooltune.integrations.verl.sessions`): the
trajectory path (an ``agent_data`` carrying the row's ``tools_kwargs``, as verl's agent loop passes it)
and the direct path (create / execute / calc_reward / release under one instance id), on the
synthetic_chain, BFCL and MCP environments, with the refusals that must not raise."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from tooltune.data.mcp_tasks import task_from_record
from tooltune.data.synthetic.chain_tasks import generate_chain_tasks
from tooltune.environments.mcp.client import McpConnection, close_all
from tooltune.environments.mcp.data import McpServer
from tooltune.integrations.verl.config import OUTCOME_FIELD, agentic_fields
from tooltune.integrations.verl.sessions import ToolSessions, outcome_score
from tooltune.schema import Sample


class AgentData:
    """What verl's AgentData gives a tool: the row's tools_kwargs and the trajectory's extra fields."""

    def __init__(self, tools_kwargs: Any) -> None:
        self.tools_kwargs = tools_kwargs
        self.extra_fields: dict[str, Any] = {}


def _agent_data(task: Sample) -> AgentData:
    return AgentData(agentic_fields(task)[1]["tools_kwargs"])


def _run(sessions: ToolSessions, data: Any, calls: list[dict[str, Any]]) -> list[str]:
    texts = []
    for n, call in enumerate(calls):  # verl: a fresh instance id per call, released after it
        instance = f"call-{n}"
        sessions.open(instance, {})
        texts.append(sessions.call(call["name"], instance, call["arguments"], data).content)
        sessions.close(instance)
    return texts


def test_a_trajectory_keeps_one_environment_and_records_its_outcome():
    task = generate_chain_tasks(1, seed=0, split="train")[0]
    goal = task.meta["env"]["goal"]
    sessions, data = ToolSessions(), _agent_data(task)
    texts = _run(sessions, data, goal[:1])
    assert json.loads(texts[0]) == task.meta["env"]["results"][0][1]
    assert data.extra_fields[OUTCOME_FIELD] == 0.0  # half way: the goal is not reached yet
    _run(sessions, data, goal[1:])
    assert data.extra_fields[OUTCOME_FIELD] == 1.0
    info = {**agentic_fields(task)[1], **data.extra_fields}
    assert outcome_score("tooltune/quickstart", "", "[]", info) == 1.0
    assert outcome_score("tooltune/quickstart", "", "[]", agentic_fields(task)[1]) == 0.0  # no step yet
    other = _agent_data(task)  # another trajectory of the same task starts from the initial state
    _run(sessions, other, goal[1:])
    assert other.extra_fields[OUTCOME_FIELD] == 0.0


def test_refusals_are_failed_steps_with_reasons():
    task = generate_chain_tasks(1, seed=0, split="train")[0]
    sessions, data = ToolSessions(), _agent_data(task)
    unknown, bad_args = _run(sessions, data, [{"name": "rm_rf", "arguments": {}},
                                              {"name": "search_trains", "arguments": {"speed": 1}}])
    assert "unknown tool 'rm_rf'" in unknown and "unknown argument" in bad_args
    assert "arguments must be an object" in sessions.call("search_trains", "x", "[1, 2]", data).content
    broken = AgentData({"tooltune": {"create_kwargs": {"task": "{cut"}}})
    assert "the row's task did not load" in _run(sessions, broken, [{"name": "x", "arguments": {}}])[0]
    assert "no task" in _run(sessions, AgentData({"tooltune": None}), [{"name": "x", "arguments": {}}])[0]
    plain = SimpleNamespace(tools_kwargs=agentic_fields(task)[1]["tools_kwargs"], extra_fields={})
    assert "unknown tool" in _run(sessions, plain, [{"name": "rm_rf", "arguments": {}}])[0]  # no weakref
    assert outcome_score("", "", None, {"tools_kwargs": {"tooltune": {"create_kwargs": {"task": 3}}}}) == 0.0
    assert outcome_score("", "", None, None) == 0.0


def test_direct_episodes_on_bfcl_are_judged_by_score_and_ended_by_close():
    pytest.importorskip("bfcl_eval")
    from tooltune.data.synthetic.bfcl_tasks import generate_bfcl_tasks

    task = generate_bfcl_tasks(1, seed=0, split="train")[0]
    gold = [c for turn in task.meta["env"]["ground_truth"] for c in turn]
    sessions = ToolSessions()
    sessions.open("episode", {"task": task.to_json()})
    for call in gold:
        assert not sessions.call(call["name"], "episode", call["arguments"]).error
    assert sessions.score("episode") == 1.0
    sessions.close("episode")
    assert "no task" in sessions.call(gold[0]["name"], "episode", gold[0]["arguments"]).content


def test_an_mcp_trajectory_is_judged_at_the_end_only():
    pytest.importorskip("mcp")
    server = McpServer.parse([sys.executable, "-m", "tooltune.environments.mcp.notes"])
    conn = McpConnection(server).start()
    try:
        tools = conn.list_tools()
    finally:
        conn.close()
    add = {"name": "add_note", "arguments": {"title": "groceries", "text": "milk"}}
    record = {"id": "notes", "prompt": "Save a note", "check": {"kind": "calls", "calls": [add]}}
    task = task_from_record(record, server, tools)
    sessions, data = ToolSessions(), _agent_data(task)
    try:
        texts = _run(sessions, data, [add])
        assert json.loads(texts[0])["saved"] == "groceries"
        assert OUTCOME_FIELD not in data.extra_fields  # judging would end the episode's server
        assert sessions.score("unused", data) == 1.0
    finally:
        close_all()
