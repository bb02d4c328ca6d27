"""Every environment step is bounded: a step past its time budget is a failed step saying why (and the
episode goes on), and no argument of any method of any environment class makes a step run long.

The property tests call every method of every environment class (BFCL's eight API classes, ACEBench's
simulated APIs, the synthetic chain) with hostile numbers, string lengths and nesting, under a budget
far above any real call, and require a tool message and no stopped step.
"""

from __future__ import annotations

import importlib.util
import inspect
import signal
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooltune.environments import bfcl, make_environment
from tooltune.environments.acebench import AcebenchEnvironment
from tooltune.environments.acebench_apis import CLASSES as ACE_CLASSES
from tooltune.environments.base import MAX_ARGUMENT_DEPTH, MAX_RESULT_CHARS, Environment
from tooltune.environments.limits import STEP_SECONDS, StepTimeout, shielded, step_budget
from tooltune.schema import Sample, Scoring, ToolCall, ToolSpec

LOOSE = 30.0
"""The budget of the property tests: far above any real call, so only a runaway step reaches it."""

BIG_INT = 10**4000  # just under Python's 4,300-digit limit for int <-> text
NUMBERS = st.one_of(
    st.sampled_from([0, 1, -1, 2**63, -(2**63), 10**18, -(10**18), 10**8, -(10**8), BIG_INT, -BIG_INT,
                     1e308, -1e308, 5e-324, 0.5, -0.5]),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
)
PIECES = st.sampled_from(["x", "../", "a/", "%s", "-", "9", "é"])
LENGTHS = st.sampled_from([0, 1, 2, 100, 4_000, 19_000])
STRINGS = st.builds(lambda piece, n: (piece * n)[:19_000], PIECES, LENGTHS)


def _nested(leaf: object, depth: int) -> object:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


NESTED = st.builds(_nested, NUMBERS | STRINGS, st.integers(min_value=1, max_value=MAX_ARGUMENT_DEPTH + 2))
LISTS = st.builds(lambda v, n: [v] * n, NUMBERS | st.sampled_from(["x", "x" * 2000]),
                  st.sampled_from([0, 1, 10, 1000, 9000]))
ODD = st.sampled_from([None, True, False, [], {}, {"k": "v" * 10_000}])
VALUES = NUMBERS | STRINGS | NESTED | LISTS | ODD


def _check_any_call(env: Environment, name: str, params: list[str], data: st.DataObject) -> None:
    args = {p: data.draw(VALUES, label=p) for p in params}
    env.step_seconds = LOOSE
    result = env.step(ToolCall(name, args))
    assert isinstance(result.content, str) and len(result.content) <= MAX_RESULT_CHARS
    assert env.timeouts == 0, result.content


# --- the budget ---------------------------------------------------------------------------------------


class _Slow(Environment):
    """An environment whose only tool runs as long as it is told (a pure Python loop, or a sleep)."""

    name = "slow_test"

    def _load(self, task: Sample, spec: dict) -> None:
        self.state: list[str] = []

    def _execute(self, call: ToolCall) -> object:
        from tooltune.environments.base import ok_result

        if call.name == "spin":  # a loop that swallows ordinary exceptions, as some API code does
            while True:
                try:
                    sum(range(1000))
                except Exception:
                    continue
        if call.name == "sleep":
            time.sleep(call.arguments["s"])
        self.state.append(call.name)
        return ok_result({"ran": call.name})

    def outcome(self, final_text: str | None = None):
        raise NotImplementedError


def _slow() -> _Slow:
    env = _Slow()
    env.reset(Sample("s", "test", "multi_step", [{"role": "user", "content": "x"}], [], [],
                     meta={"env": {"name": "slow_test"}}))
    return env


def test_a_runaway_step_is_a_failed_step_with_a_reason_and_the_episode_goes_on():
    env = _slow()
    env.step_seconds = 0.2
    handler = signal.getsignal(signal.SIGALRM)
    stopped = env.step(ToolCall("spin", {}))
    assert stopped.error and "time budget of 0.2 s" in stopped.content and "'spin'" in stopped.content
    assert env.timeouts == 1 and env.errors == 1
    after = env.step(ToolCall("ok", {}))
    assert not after.error and env.state == ["ok"]
    assert signal.getsignal(signal.SIGALRM) is handler  # the process's handler is back, nothing armed
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0.0


def test_every_environment_has_the_default_budget():
    assert STEP_SECONDS > 0
    for name in ("synthetic_chain", "bfcl", "acebench"):
        assert make_environment(name).step_seconds == STEP_SECONDS


def test_off_the_main_thread_a_step_over_budget_still_counts_as_failed():
    env = _slow()
    env.step_seconds = 0.05
    out: list = []
    worker = threading.Thread(target=lambda: out.append(env.step(ToolCall("sleep", {"s": 0.3}))))
    worker.start()
    worker.join()
    assert out[0].error and "time budget" in out[0].content and env.timeouts == 1


def test_a_timer_of_the_caller_is_left_alone():
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 100.0)
        env = _slow()
        env.step_seconds = 0.05
        result = env.step(ToolCall("sleep", {"s": 0.2}))  # not cut short: the caller's timer is armed
        assert result.error and "time budget" in result.content
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 100.0
        assert fired == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_shielded_block_finishes_and_the_alarm_fires_after_it():
    finished = []
    with pytest.raises(StepTimeout, match="time budget"), step_budget(0.05, "x"):
        with shielded():
            time.sleep(0.2)  # the alarm comes due here and waits
            finished.append(True)
        while True:  # the held-back alarm stops this loop
            sum(range(100))
    assert finished == [True]
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0.0


def test_no_budget_runs_the_block_as_it_is():
    with step_budget(0):
        time.sleep(0.01)


# --- every method of every environment class ------------------------------------------------------------


def _ace_tools() -> list[ToolSpec]:
    """A spec per public method of every ACEBench class, its parameters untyped (any value reaches it)."""
    out: dict[str, ToolSpec] = {}
    for cls in ACE_CLASSES.values():
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("_"):
                params = [p for p in inspect.signature(fn).parameters if p != "self"]
                out[name] = ToolSpec(name, "", {"type": "object", "properties": {p: {} for p in params}})
    return sorted(out.values(), key=lambda t: t.name)


ACE_TOOLS = _ace_tools()


@pytest.fixture(scope="module")
def ace_env() -> AcebenchEnvironment:
    env = AcebenchEnvironment()
    spec = {"name": "acebench", "involved_classes": sorted(ACE_CLASSES), "goal_state": [],
            "initial_config": {"BaseApi": {"wifi": True, "logged_in": True}}}
    env.reset(Sample("ace", "test", "multi_step", [{"role": "user", "content": "x"}], ACE_TOOLS, [],
                     meta={"env": spec}))
    return env


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.sampled_from(ACE_TOOLS), data=st.data())
def test_any_call_of_any_acebench_method_returns_a_message_within_budget(ace_env, tool, data):
    _check_any_call(ace_env, tool.name, list(tool.properties), data)


CHAIN_TOOLS = [ToolSpec("find_station", "", {"type": "object", "properties": {"city": {"type": "string"}},
                                              "required": ["city"]}),
               ToolSpec("book_seats", "", {"type": "object", "properties": {"city": {}, "seats": {}}})]


@pytest.fixture(scope="module")
def chain_env() -> Environment:
    env = make_environment("synthetic_chain")
    goal = [{"name": "find_station", "arguments": {"city": "Sydney"}}]
    spec = {"name": "synthetic_chain", "goal": goal, "results": [[goal[0], {"next": "Paris"}]],
            "lookups": {"find_station": {"field": "next", "values": ["Rome", "Oslo"]}}}
    env.reset(Sample("chain", "test", "multi_step", [{"role": "user", "content": "x"}], CHAIN_TOOLS, [],
                     meta={"env": spec}))
    return env


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.sampled_from(CHAIN_TOOLS), data=st.data())
def test_any_call_of_the_synthetic_chain_returns_a_message_within_budget(chain_env, tool, data):
    _check_any_call(chain_env, tool.name, list(tool.properties), data)


def _bfcl_docs() -> list[tuple[str, dict]]:
    if importlib.util.find_spec("bfcl_eval") is None:
        return []
    return [(c, d) for c in sorted(bfcl.CLASSES) for d in bfcl.function_docs(c)]


BFCL_DOCS = _bfcl_docs()


@pytest.fixture(scope="module", params=tuple(Scoring))
def bfcl_env(request):
    from tooltune.data.sources.types import tool_spec_from_source

    if not BFCL_DOCS:
        pytest.skip("bfcl-eval is not installed (requirements/bfcl*.txt)")
    tools = [tool_spec_from_source(d) for _, d in BFCL_DOCS]
    spec = {"name": "bfcl", "involved_classes": sorted(bfcl.CLASSES), "initial_config": {},
            "ground_truth": []}
    env = bfcl.BfclEnvironment(scoring=request.param)
    env.reset(Sample("all", "test", "multi_step", [{"role": "user", "content": "x"}], tools, [],
                     meta={"env": spec}))
    return env


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.sampled_from(BFCL_DOCS or [("", {})]), data=st.data())
def test_any_call_of_any_bfcl_method_returns_a_message_within_budget(bfcl_env, doc, data):
    _, d = doc
    _check_any_call(bfcl_env, d["name"], list(d["parameters"]["properties"]), data)
