"""The bfcl environment: BFCL's own API classes, stepped with parsed calls, judged like BFCL's checker.

Runs on the installed bfcl-eval package (its classes and function documents). Hostile calls must be
answered with an error (or stored as plain data), change no state and run nothing but the offered
methods.
"""

from __future__ import annotations

import builtins
import copy
import decimal
import json
import os
import random
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")

from tooltune.config import UnknownName
from tooltune.data.sources.types import tool_spec_from_source
from tooltune.environments import make_environment
from tooltune.environments.base import MAX_ARGUMENT_DEPTH, TaskError, check_literals
from tooltune.environments.bfcl import (
    CLASSES,
    CORRECTED_RULES,
    BfclEnvironment,
    api_class,
    function_docs,
    public_functions,
)
from tooltune.schema import Sample, Scoring, ToolCall

FS_CONFIG = {"GorillaFileSystem": {"root": {"mira": {"type": "directory", "contents": {
    "notes": {"type": "directory", "contents": {
        "plan.txt": {"type": "file", "content": "ship the prototype\nreview the budget\nbudget approved"}}},
    "empty": {"type": "directory", "contents": {}}}}}}}
FS_TRUTH = [[{"name": "cd", "arguments": {"folder": "notes"}}],
            [{"name": "mkdir", "arguments": {"dir_name": "old"}}],
            [{"name": "grep", "arguments": {"file_name": "plan.txt", "pattern": "budget"}}]]
GREP = '{"matching_lines": ["review the budget", "budget approved"]}'
CAR_CONFIG = {"VehicleControlAPI": {"fuelLevel": 10.0, "doorStatus": {
    "driver": "unlocked", "passenger": "unlocked", "rear_left": "locked", "rear_right": "locked"}}}


def _tools(classes, drop=()):
    return [tool_spec_from_source(d) for c in classes for d in function_docs(c) if d["name"] not in drop]


def _task(classes=("GorillaFileSystem",), config=None, truth=None, required=(), drop=(), task_id="t"):
    env = {"name": "bfcl", "involved_classes": list(classes),
           "initial_config": copy.deepcopy(FS_CONFIG if config is None else config),
           "ground_truth": FS_TRUTH if truth is None else truth, "required_responses": list(required)}
    return Sample(task_id, "test", "multi_step", [{"role": "user", "content": "do it"}],
                  _tools(classes, drop), [], meta={"env": env})


def _state(env: BfclEnvironment) -> dict:
    """Every instance's attributes, private ones included (a deep copy to compare later; a random
    generator by its state)."""
    return {c: {k: v.getstate() if isinstance(v, random.Random) else copy.deepcopy(v)
                for k, v in vars(i).items()} for c, i in env.instances.items()}


def _env(task: Sample) -> BfclEnvironment:
    env = BfclEnvironment(Scoring.CORRECTED)
    env.reset(task)
    return env


@pytest.mark.parametrize("class_name", sorted(CLASSES))
def test_every_documented_function_is_a_public_method_of_its_class(class_name):
    docs = function_docs(class_name)
    assert 5 <= len(docs) <= 25
    assert {d["name"] for d in docs} <= set(public_functions(api_class(class_name)))
    assert all(tool_spec_from_source(d).parameters["type"] == "object" for d in docs)


def test_an_unknown_class_names_the_closest():
    closest = r"involved_classes: unknown BFCL class 'MathApi' \(did you mean MathAPI\?\); registered: "
    for lookup in (function_docs, api_class):
        with pytest.raises(UnknownName, match=closest):
            lookup("MathApi")


def test_registered_and_made_by_name():
    assert isinstance(make_environment("bfcl"), BfclEnvironment)


def test_ground_truth_play_succeeds_and_the_outcome_names_what_differs():
    env = _env(_task(required=[GREP]))
    results = [env.step(ToolCall.from_dict(c)) for step in FS_TRUTH for c in step]
    assert [r.error for r in results] == [False, False, False] and results[2].content == GREP
    out = env.outcome("done")
    assert out.success and out.score == 1.0 and out.details["differences"] == {}

    env = _env(_task(required=[GREP]))
    env.step(ToolCall("cd", {"folder": "notes"}))
    env.step(ToolCall("mkdir", {"dir_name": "older"}))
    out = env.outcome()
    assert not out.success and out.score == 0.0
    assert set(out.details["differences"]) == {"GorillaFileSystem"}
    assert set(out.details["differences"]["GorillaFileSystem"]) == {"root"}  # _current_dir is not state
    assert out.details["missing_responses"] == [GREP]


def test_required_response_in_tool_results_or_in_the_final_answer():
    env = _env(_task(required=[GREP]))
    env.step(ToolCall("cd", {"folder": "notes"}))
    env.step(ToolCall("mkdir", {"dir_name": "old"}))
    assert not env.outcome("the budget lines").success  # state right, the lines never produced
    assert env.outcome(f"here: {GREP}").success
    env.step(ToolCall("grep", {"file_name": "plan.txt", "pattern": "budget"}))
    assert env.outcome().success


def test_an_api_error_result_is_flagged_and_changes_nothing():
    env = _env(_task())
    before = _state(env)
    r = env.step(ToolCall("cd", {"folder": "nowhere"}))
    assert r.error and "No such" in r.content
    assert _state(env) == before and env.errors == 1


def test_an_exception_inside_a_method_restores_the_instance():
    # lockDoors locks "driver" and then fails on the unknown door: the half-done change is undone
    env = _env(_task(("VehicleControlAPI",), CAR_CONFIG, truth=[]))
    before = _state(env)
    r = env.step(ToolCall("lockDoors", {"unlock": False, "door": ["driver", "trunk"]}))
    assert r.error and r.content.startswith("Error during execution:")
    assert _state(env) == before
    assert env.instances["VehicleControlAPI"].doorStatus["driver"] == "unlocked"


HOSTILE = [
    ToolCall("__init__", {}),
    ToolCall("_load_scenario", {"scenario": {}}),
    ToolCall("_navigate_to_directory", {"path": "/"}),
    ToolCall("__class__", {}),
    ToolCall("__dict__", {}),
    ToolCall("__reduce__", {}),
    ToolCall("root", {}),
    ToolCall("long_context", {}),
    ToolCall("eval", {"source": "1+1"}),
    ToolCall("exec", {"source": "x=1"}),
    ToolCall("__import__", {"name": "os"}),
    ToolCall("os.system", {"command": "true"}),
    ToolCall("ls.__globals__", {}),
    ToolCall("rm", {"file_name": "plan.txt"}),  # a real method, but not offered in this task
    ToolCall("send_message", {"receiver_id": "USR001", "message": "hi"}),  # MessageAPI is not involved
    ToolCall("mkdir", {"dir_name": "x", "evil": 1}),
    ToolCall("mkdir", {"dir_name": "x", "__class__": 1}),
    ToolCall("mkdir", {"dir_name": "x", "self": 1}),
    ToolCall("mkdir", {"dir name": "x"}),
    ToolCall("mkdir", {}),
    ToolCall("mkdir", {"dir_name": 5}),
    ToolCall("mkdir", {"dir_name": ["a"]}),
    ToolCall("ls", {"a": "yes"}),
    ToolCall("mkdir", {"dir_name": float("nan")}),
    ToolCall("mkdir", {"dir_name": {"a", "b"}}),
    ToolCall("mkdir", {"dir_name": object()}),
    ToolCall("mkdir", {"dir_name": type("Evil", (str,), {"__eq__": lambda s, o: True})("x")}),
    ToolCall("mkdir", {"dir_name": b"bytes"}),
    ToolCall("mkdir", {"dir_name": "x" * 100_000}),
    ToolCall("find", {"path": ".", "name": "a" * 30_000}),
]


def _nested(depth: int):
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE += [ToolCall("find", {"path": _nested(MAX_ARGUMENT_DEPTH + 5)}),
            ToolCall("find", {"path": _nested(5000)})]


@pytest.fixture
def sentinels(monkeypatch):
    """Record any call of code that no offered method should reach."""
    hits: list[str] = []

    def sentinel(name):
        def hit(*a, **k):
            hits.append(name)
            raise RuntimeError(f"sentinel {name}")
        return hit

    fs = api_class("GorillaFileSystem")

    def arm(private: bool = True):
        targets = [(builtins, "eval"), (builtins, "exec"), (os, "system"), (os, "popen"),
                   (subprocess, "Popen"), (subprocess, "run"), (fs, "__init__"), (fs, "_load_scenario")]
        if private:  # offered methods use the private helpers themselves
            targets.append((fs, "_navigate_to_directory"))
        for owner, attr in targets:
            monkeypatch.setattr(owner, attr, sentinel(f"{getattr(owner, '__name__', owner)}.{attr}"))

    return arm, hits, monkeypatch


def _id(call: ToolCall) -> str:
    return call.name[:30] + ":" + ",".join(map(str, call.arguments))[:30]


@pytest.mark.parametrize("call", HOSTILE, ids=_id)
def test_hostile_call_is_refused_changes_nothing_and_runs_nothing_else(call, sentinels):
    arm, hits, monkeypatch = sentinels
    env = _env(_task(("GorillaFileSystem",), drop={"rm"}))
    before = _state(env)
    arm()
    result = env.step(call)
    monkeypatch.undo()
    assert hits == []
    assert result.error
    assert json.loads(result.content)["error"]  # refused before anything ran: the JSON error shape
    assert _state(env) == before


def test_code_in_a_string_argument_is_stored_as_text(tmp_path, sentinels):
    arm, hits, monkeypatch = sentinels
    marker = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {marker}')"
    env = _env(_task())
    arm(private=False)
    results = [env.step(ToolCall("cd", {"folder": "notes"})),
               env.step(ToolCall("echo", {"content": payload, "file_name": "plan.txt"})),
               env.step(ToolCall("mkdir", {"dir_name": "eval('1')"})),
               env.step(ToolCall("cat", {"file_name": "plan.txt"}))]
    monkeypatch.undo()
    assert hits == [] and not marker.exists()
    assert [r.error for r in results] == [False, False, False, False]
    assert json.loads(results[3].content) == {"file_content": payload}


def test_step_never_raises_on_any_call_of_every_offered_tool():
    env = _env(_task(("GorillaFileSystem", "MathAPI", "MessageAPI", "TradingBot", "TravelAPI",
                      "TwitterAPI", "TicketAPI", "VehicleControlAPI"), config={}, truth=[]))
    odd = [None, -1, 0, 1e308, "", "..", "/", [], {}, [None], {"a": None}, True]
    for tool in env.tools:
        for value in odd:
            args = {p: value for p in tool.properties}
            result = env.step(ToolCall(tool.name, args))
            assert isinstance(result.content, str)


def test_reset_isolation_between_tasks_and_environments():
    a = _task(task_id="a")
    meta = copy.deepcopy(a.meta)
    env, other = _env(a), _env(a)
    fresh = _state(other)
    env.step(ToolCall("cd", {"folder": "notes"}))
    env.step(ToolCall("mkdir", {"dir_name": "old"}))
    env.step(ToolCall("echo", {"content": "changed", "file_name": "plan.txt"}))
    assert _state(other) == fresh  # no instance is shared
    env.reset(a)
    assert _state(env) == fresh and env.results == [] and env.calls_made == 0
    assert a.meta == meta  # the task's initial config is never written to

    msg = make_environment("bfcl")
    msg.reset(_task(("MessageAPI",), config={}, truth=[], task_id="b"))
    default_users = copy.deepcopy(msg.instances["MessageAPI"].user_map)
    msg.step(ToolCall("add_contact", {"user_name": "Zed"}))
    msg.reset(_task(("MessageAPI",), config={}, truth=[], task_id="c"))
    assert msg.instances["MessageAPI"].user_map == default_users  # BFCL's defaults were not mutated
    assert "GorillaFileSystem" not in msg.instances


@pytest.mark.parametrize("env_spec, why", [
    ({"involved_classes": ["WebSearchAPI"]}, "involved_classes"),
    ({"involved_classes": ["os"]}, "involved_classes"),
    ({"involved_classes": "GorillaFileSystem"}, "involved_classes"),
    ({"involved_classes": ["GorillaFileSystem", "GorillaFileSystem"]}, "involved_classes"),
    ({"involved_classes": ["GorillaFileSystem"], "initial_config": []}, "initial_config"),
    ({"involved_classes": ["GorillaFileSystem"], "ground_truth": "cd('x')"}, "ground_truth"),
    ({"involved_classes": ["GorillaFileSystem"], "required_responses": [1]}, "required_responses"),
    ({"involved_classes": ["GorillaFileSystem"],
      "initial_config": {"GorillaFileSystem": {"root": {"a": {"type": "directory"}}}}}, "initial_config"),
])
def test_malformed_task_raises_task_error_naming_the_field(env_spec, why):
    task = Sample("bad", "test", "multi_step", [{"role": "user", "content": "x"}], [], [],
                  meta={"env": {"name": "bfcl", **env_spec}})
    with pytest.raises(TaskError, match=why):
        BfclEnvironment().reset(task)


def test_tools_must_be_methods_of_the_involved_classes():
    task = _task()
    task.tools = task.tools + _tools(("MessageAPI",))[:1]
    with pytest.raises(TaskError, match="not methods"):
        BfclEnvironment().reset(task)


def test_math_calls_are_bounded_and_leave_the_process_precision_alone():
    env = _env(_task(("MathAPI",), config={}, truth=[]))
    precision = decimal.getcontext().prec
    ok = env.step(ToolCall("square_root", {"number": 2, "precision": 50}))
    assert not ok.error and "1.41421356237309504880168872420969807856967187537" in ok.content  # 50 digits
    assert decimal.getcontext().prec == precision
    for call in (ToolCall("square_root", {"number": 2, "precision": 10**7}),
                 ToolCall("logarithm", {"value": 3, "base": 2, "precision": 10**7}),
                 ToolCall("power", {"base": 10, "exponent": 10**9}),
                 ToolCall("power", {"base": 10**40, "exponent": 3})):
        result = env.step(call)
        assert result.error and "at most" in result.content
    assert not env.step(ToolCall("power", {"base": 2, "exponent": 10})).error


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
_ALL = ("GorillaFileSystem", "MathAPI", "MessageAPI", "TradingBot", "TravelAPI", "TwitterAPI", "TicketAPI",
        "VehicleControlAPI")


@pytest.fixture(scope="module")
def everything() -> BfclEnvironment:
    return _env(_task(_ALL, config={}, truth=[]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from([d["name"] for c in _ALL for d in function_docs(c)] + ["__init__", "_random"]),
       args=st.dictionaries(st.text(max_size=12), _JSON, max_size=4), data=st.data())
def test_any_literal_call_returns_a_tool_message(everything, name, args, data):
    env = everything
    doc = next((d for c in _ALL for d in function_docs(c) if d["name"] == name), None)
    if doc and data.draw(st.booleans()):  # often use the documented argument names
        args = {p: data.draw(_JSON) for p in doc["parameters"]["properties"]}
    result = env.step(ToolCall(name, args))
    assert isinstance(result.content, str) and len(result.content) <= 2000
    assert set(env.instances) == set(_ALL)


# --- scoring="official": BFCL's own outcome, one test per rule of CORRECTED_RULES ---------------------


def _both(task: Sample) -> dict[str, BfclEnvironment]:
    envs = {s: BfclEnvironment(scoring=s) for s in Scoring}
    for env in envs.values():
        env.reset(task)
    return envs


def _play(envs: dict[str, BfclEnvironment], calls: list[ToolCall]) -> dict[str, list]:
    return {s: [env.step(c) for c in calls] for s, env in envs.items()}


FS_PLAY = [ToolCall("cd", {"folder": "notes"}), ToolCall("mkdir", {"dir_name": "old"})]


def test_official_ground_truth_play_succeeds_and_unknown_scoring_is_refused():
    envs = _both(_task(required=[GREP]))
    _play(envs, [ToolCall.from_dict(c) for step in FS_TRUTH for c in step])
    assert all(env.outcome().success for env in envs.values())
    assert envs["official"].outcome().details["scoring"] == "official"
    with pytest.raises(ValueError, match="scoring"):
        BfclEnvironment(scoring="lenient")
    assert make_environment("bfcl").scoring is Scoring.CORRECTED  # the training signal, by name


def test_rule_final_answer_counts():
    envs = _both(_task(required=[GREP]))
    _play(envs, FS_PLAY)  # the state is right; the grep lines only appear in the answer text
    assert envs["corrected"].outcome(f"the lines: {GREP}").success
    official = envs["official"].outcome(f"the lines: {GREP}")
    assert not official.success and official.details["missing_responses"] == [GREP]
    assert "final_answer_counts" in CORRECTED_RULES


def test_rule_required_once():
    truth = [*FS_TRUTH, FS_TRUTH[2]]  # the ground truth greps twice: BFCL wants the lines twice
    envs = _both(_task(truth=truth, required=[GREP, GREP]))
    _play(envs, [*FS_PLAY, ToolCall("grep", {"file_name": "plan.txt", "pattern": "budget"})])
    assert envs["corrected"].outcome().success
    assert envs["official"].outcome().details["missing_responses"] == [GREP]
    envs["official"].step(ToolCall("grep", {"file_name": "plan.txt", "pattern": "budget"}))
    assert envs["official"].outcome().success
    assert "required_once" in CORRECTED_RULES


def test_rule_asked_responses_only():
    truth = [FS_TRUTH[0], [{"name": "ls", "arguments": {}}], FS_TRUTH[2]]  # a listing nobody asked for
    envs = _both(_task(truth=truth, required=[GREP]))
    _play(envs, [FS_PLAY[0], ToolCall("grep", {"file_name": "plan.txt", "pattern": "budget"})])
    assert envs["corrected"].outcome().success
    official = envs["official"].outcome()
    listing = '{"current_directory_content": ["plan.txt"]}'
    assert not official.success and official.details["missing_responses"] == [listing]
    assert "asked_responses_only" in CORRECTED_RULES


TRAVEL = {"TravelAPI": {"access_token": "tok", "token_expires_in": 10, "token_type": "Bearer"}}
CARD = {"access_token": "tok", "card_number": "4111222233334444", "expiration_date": "12/2030",
        "cardholder_name": "Mira Chen", "card_verification_number": 465}


@pytest.mark.parametrize("truth, played", [
    ({"name": "register_credit_card", "arguments": CARD},
     ToolCall("register_credit_card", {**CARD, "card_verification_number": 465.0})),
    ({"name": "set_budget_limit", "arguments": {"access_token": "tok", "budget_limit": 2000.0}},
     ToolCall("set_budget_limit", {"access_token": "tok", "budget_limit": "2000.0"})),
])
def test_rule_schema_check(truth, played):
    envs = _both(_task(("TravelAPI",), TRAVEL, truth=[[truth]]))
    results = _play(envs, [played])
    assert results["corrected"][0].error and "must be" in results["corrected"][0].content
    assert not results["official"][0].error  # BFCL runs it; the method accepts the value
    assert not envs["corrected"].outcome().success
    assert envs["official"].outcome().success
    assert "schema_check" in CORRECTED_RULES


def test_rule_offered_only():
    truth = [FS_TRUTH[0], [{"name": "rm", "arguments": {"file_name": "plan.txt"}}]]
    envs = _both(_task(truth=truth, drop={"rm"}))
    _play(envs, [ToolCall("cd", {"folder": "notes"}), ToolCall("rm", {"file_name": "plan.txt"})])
    assert envs["corrected"].errors == 1 and not envs["corrected"].outcome().success
    assert envs["official"].errors == 0 and envs["official"].outcome().success
    assert "offered_only" in CORRECTED_RULES


def test_rule_restore_on_error():
    envs = _both(_task(("VehicleControlAPI",), CAR_CONFIG, truth=[]))
    results = _play(envs, [ToolCall("lockDoors", {"unlock": False, "door": ["driver", "trunk"]})])
    assert all(r[0].error and r[0].content.startswith("Error during execution:") for r in results.values())
    assert envs["corrected"].instances["VehicleControlAPI"].doorStatus["driver"] == "unlocked"
    assert envs["official"].instances["VehicleControlAPI"].doorStatus["driver"] == "locked"  # BFCL keeps it
    assert envs["corrected"].outcome().success and not envs["official"].outcome().success
    assert "restore_on_error" in CORRECTED_RULES


@pytest.mark.parametrize("call", [c for c in HOSTILE if check_literals(c) or c.name not in public_functions(
    api_class("GorillaFileSystem"))], ids=_id)
def test_official_still_refuses_what_is_not_a_plain_literal_call_of_a_method(call, sentinels):
    arm, hits, monkeypatch = sentinels
    env = BfclEnvironment(scoring="official")
    env.reset(_task(("GorillaFileSystem",), drop={"rm"}))
    before = _state(env)
    arm()
    result = env.step(call)
    monkeypatch.undo()
    assert hits == [] and result.error and json.loads(result.content)["error"]
    assert _state(env) == before


def test_every_rule_is_documented():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "environments.md").read_text(encoding="utf-8")
    assert all(f"`{rule}`" in doc for rule in CORRECTED_RULES)
