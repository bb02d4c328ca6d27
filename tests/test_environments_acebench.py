"""The acebench environment: ACEBench's simulated phone/travel APIs, judged on the end state.

The agent entries of the real data ($TOOLTUNE_DATA_DIR/acebench) serve as tasks; hostile calls must be
refused (or stored as plain data), change no state and start nothing.
"""

from __future__ import annotations

import builtins
import copy
import json
import os
import subprocess
from pathlib import Path

import pytest

from tooltune.config import UnknownName
from tooltune.environments import make_environment
from tooltune.environments.acebench import AcebenchEnvironment, entry_task
from tooltune.environments.acebench_apis import CLASSES, Sandbox
from tooltune.environments.base import MAX_ARGUMENT_DEPTH, TaskError
from tooltune.evaluation import acebench as A
from tooltune.schema import Sample, ToolCall


@pytest.fixture(scope="module")
def entries(shared_data_dir: Path) -> list[A.AgentEntry]:
    return A.load_agent_entries(shared_data_dir / "acebench", A.AGENT_CATEGORIES)


def _entry_task(e: A.AgentEntry) -> Sample:
    variant = "multi_turn" if e.category == "agent_multi_turn" else "multi_step"
    return entry_task(e.id, e.question, e.tools, e.initial_config, e.involved, e.ground_truth, variant)


def _reset(task: Sample) -> AcebenchEnvironment:
    env = AcebenchEnvironment()
    env.reset(task)
    return env


PHONE_TRUTH = [[{"name": "turn_on_wifi", "arguments": {}}],
               [{"name": "delete_message", "arguments": {"message_id": 1}}],
               [{"name": "send_message", "arguments": {"sender_name": "Eve", "receiver_name": "Frank",
                                                       "message": "see you at 4"}}]]


def _phone_task(entries, truth=None, task_id="phone") -> Sample:
    """A tooltune task on the phone APIs, its goal given as ground-truth calls."""
    tools = {t.name: t for e in entries for t in e.tools}
    names = ["turn_on_wifi", "login_device", "send_message", "delete_message",
             "view_messages_between_users", "get_latest_message_id", "add_reminder", "search_reminders"]
    env = {"name": "acebench", "involved_classes": ["BaseApi", "MessageApi", "ReminderApi"],
           "initial_config": {"BaseApi": {"wifi": False, "logged_in": True}}, "variant": "multi_step",
           "ground_truth": PHONE_TRUTH if truth is None else truth}
    return Sample(task_id, "test", "multi_step", [{"role": "user", "content": "x"}],
                  [tools[n] for n in names], [], meta={"env": env})


def test_a_sandbox_of_an_unknown_class_is_refused_naming_the_closest():
    closest = r"involved_classes: unknown ACEBench class 'MessageAPI' \(did you mean MessageApi\?\)"
    with pytest.raises(UnknownName, match=closest):
        Sandbox({}, ["BaseApi", "MessageAPI"], "en")
    assert Sandbox({}, ["BaseApi", "MessageApi"], "en").involved == ["BaseApi", "MessageApi"]


def test_registered_and_made_by_name():
    assert isinstance(make_environment("acebench"), AcebenchEnvironment)


def test_every_agent_entry_is_solved_by_its_plan_and_failed_by_doing_nothing(entries):
    assert len(entries) == 50
    for e in entries:
        env = _reset(_entry_task(e))
        assert not env.outcome().success  # nothing executed: no state
        for step in A.agent_plan(e):
            for call in step:
                env.step(call)
        out = env.outcome("finish conversation")
        assert out.success and out.score == 1.0, (e.id, out.details)


def test_a_task_given_by_ground_truth_calls(entries):
    env = _reset(_phone_task(entries))
    for step in PHONE_TRUTH:
        for call in step:
            assert not env.step(ToolCall.from_dict(call)).error
    assert env.outcome().success

    env = _reset(_phone_task(entries))
    env.step(ToolCall("turn_on_wifi", {}))
    sent = env.step(ToolCall.from_dict(PHONE_TRUTH[2][0]))
    assert sent.error and "capacity" in sent.content  # the inbox is full: a failed action is flagged
    out = env.outcome()
    assert not out.success and "MessageApi.inbox" in out.details["mismatch"]


def test_a_failing_ground_truth_is_a_task_error(entries):
    with pytest.raises(TaskError, match="ground-truth call"):
        _reset(_phone_task(entries, truth=[{"name": "delete_message", "arguments": {"message_id": "x"}},
                                           {"name": "no_such_function", "arguments": {}}]))


HOSTILE = [
    ToolCall("__init__", {}),
    ToolCall("_load_scenario", {"scenario": {"wifi": True}}),
    ToolCall("_extreme_id", {"latest": True}),
    ToolCall("__class__", {}),
    ToolCall("inbox", {}),
    ToolCall("eval", {"source": "1"}),
    ToolCall("__import__", {"name": "os"}),
    ToolCall("search_messages", {"user_name": "Eve", "keyword": "x"}),  # a real method, not offered
    ToolCall("reserve_flight", {"user_id": "user1"}),  # Travel is not involved
    ToolCall("turn_on_wifi", {"x": 1}),
    ToolCall("turn_on_wifi", {"__class__": 1}),
    ToolCall("turn_on_wifi", {"self": 1}),
    ToolCall("delete_message", {}),
    ToolCall("delete_message", {"message_id": "1"}),
    ToolCall("delete_message", {"message_id": True}),
    ToolCall("delete_message", {"message_id": float("inf")}),
    ToolCall("delete_message", {"message_id": object()}),
    ToolCall("send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": "x" * 50_000}),
    ToolCall("send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": {"a", "b"}}),
    ToolCall("add_reminder", {"title": "t", "description": "d", "time": "x"} | {"deep": None}),
]


def _nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE += [ToolCall("add_reminder", {"title": "t", "description": "d", "time": _nested(depth)})
            for depth in (MAX_ARGUMENT_DEPTH + 3, 5000)]


def _id(call: ToolCall) -> str:
    return call.name[:30] + ":" + ",".join(map(str, call.arguments))[:30]


@pytest.mark.parametrize("call", HOSTILE, ids=_id)
def test_hostile_call_is_refused_and_starts_nothing(entries, call, monkeypatch):
    hits: list[str] = []

    def sentinel(*a, **k):
        hits.append("called")
        raise RuntimeError("sentinel")

    env = _reset(_phone_task(entries))
    for owner, attr in ((builtins, "eval"), (builtins, "exec"), (os, "system"), (subprocess, "Popen")):
        monkeypatch.setattr(owner, attr, sentinel)
    for cls in CLASSES.values():
        monkeypatch.setattr(cls, "__init__", sentinel)
        monkeypatch.setattr(cls, "_load_scenario", sentinel)
    result = env.step(call)
    monkeypatch.undo()
    assert hits == [] and result.error and json.loads(result.content)["error"]
    assert not env.sandbox.started and env.state() == []


def test_refused_and_failed_calls_change_no_state_once_started(entries, tmp_path):
    env = _reset(_phone_task(entries))
    env.step(ToolCall("turn_on_wifi", {}))
    before = copy.deepcopy(env.state())
    marker = tmp_path / "pwned"
    failing = [ToolCall("delete_message", {"message_id": 99}),
               ToolCall("view_messages_between_users", {"sender_name": "Eve", "receiver_name": "Zed"})]
    for call in HOSTILE + failing:
        assert env.step(call).error
    assert env.state() == before
    payload = f"__import__('os').system('touch {marker}')"
    env.step(ToolCall("delete_message", {"message_id": 1}))
    stored = env.step(ToolCall("send_message", {"sender_name": "Eve", "receiver_name": "Frank",
                                                "message": payload}))
    assert not stored.error and not marker.exists()
    inbox = next(s for s in env.state() if "MessageApi" in s)["MessageApi"]["inbox"]
    assert payload in [m["message"] for m in inbox.values()]


def test_an_exception_inside_a_method_restores_the_sandbox(entries):
    e = next(x for x in entries if "FoodPlatform" in x.involved)
    env = _reset(_entry_task(e))
    env.step(ToolCall("login_food_platform", {"username": "Eve", "password": "password123"}))
    before = copy.deepcopy(env.state())
    bad = env.step(ToolCall("add_food_delivery_order", {"username": "Eve", "merchant_name": "Domino's",
                                                         "items": ["not an item"]}))
    assert bad.error and bad.content.startswith("Error during execution")
    assert env.state() == before


def test_reset_isolation(entries):
    task = _phone_task(entries)
    meta = copy.deepcopy(task.meta)
    env, other = _reset(task), _reset(task)
    for step in PHONE_TRUTH:
        for call in step:
            env.step(ToolCall.from_dict(call))
    assert not other.sandbox.started
    env.reset(task)
    assert env.state() == [] and not env.outcome().success and env.calls_made == 0
    env.step(ToolCall("turn_on_wifi", {}))
    inbox = next(s for s in env.state() if "MessageApi" in s)["MessageApi"]["inbox"]
    assert set(inbox) == {"1", "2", "3", "4", "5", "6"}  # the deleted message is back
    assert task.meta == meta


@pytest.mark.parametrize("env_spec, why", [
    ({"involved_classes": ["Shell"], "goal_state": []}, "involved_classes"),
    ({"involved_classes": "BaseApi", "goal_state": []}, "involved_classes"),
    ({"involved_classes": ["BaseApi"], "initial_config": [], "goal_state": []}, "initial_config"),
    ({"involved_classes": ["BaseApi"], "variant": "multi_agent", "goal_state": []}, "variant"),
    ({"involved_classes": ["BaseApi"]}, "goal_state or ground_truth"),
    ({"involved_classes": ["BaseApi"], "goal_state": {"BaseApi": {}}}, "goal_state"),
    ({"involved_classes": ["BaseApi"], "ground_truth": "turn_on_wifi()"}, "ground_truth"),
])
def test_malformed_task_raises_task_error_naming_the_field(env_spec, why):
    task = Sample("bad", "test", "multi_step", [{"role": "user", "content": "x"}], [], [],
                  meta={"env": {"name": "acebench", **env_spec}})
    with pytest.raises(TaskError, match=why):
        AcebenchEnvironment().reset(task)
