"""Per-method limits of BFCL's API classes: arguments that would make a MathAPI call compute for minutes
are refused before the call, and a GorillaFileSystem tree too deep or too large is refused and put back,
so every later call still works."""

from __future__ import annotations

import copy
import json

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")

from tooltune.data.sources.types import tool_spec_from_source
from tooltune.environments.base import TaskError
from tooltune.environments.bfcl import BfclEnvironment, function_docs
from tooltune.environments.bfcl_limits import (
    MAX_DECIMAL_PLACES,
    MAX_TREE_DEPTH,
    MAX_TREE_ENTRIES,
    argument_problem,
    tree_problem,
)
from tooltune.schema import Sample, Scoring, ToolCall


def _env(cls: str, scoring: str, config: dict | None = None) -> BfclEnvironment:
    tools = [tool_spec_from_source(d) for d in function_docs(cls)]
    spec = {"name": "bfcl", "involved_classes": [cls], "initial_config": config or {}, "ground_truth": []}
    env = BfclEnvironment(scoring=scoring)
    env.reset(Sample("t", "test", "multi_step", [{"role": "user", "content": "x"}], tools, [],
                     meta={"env": spec}))
    return env


def _fs_state(env: BfclEnvironment) -> dict:
    fs = env.instances["GorillaFileSystem"]
    return {"root": copy.deepcopy(fs.root), "cwd": fs._current_dir.name}


@pytest.mark.parametrize("scoring", Scoring)
@pytest.mark.parametrize("places", [-(10**7), -(10**8), -(10**18), 10**18, -(MAX_DECIMAL_PLACES + 1)])
def test_round_number_with_huge_decimal_places_is_refused(scoring, places):
    env = _env("MathAPI", scoring)
    result = env.step(ToolCall("round_number", {"number": 5, "decimal_places": places}))
    assert result.error and "decimal_places" in result.content and str(MAX_DECIMAL_PLACES) in result.content
    assert env.timeouts == 0


@pytest.mark.parametrize("scoring", Scoring)
def test_round_number_within_the_limit_runs_as_bfcl_does(scoring):
    env = _env("MathAPI", scoring)

    def rounded(number, places):
        call = ToolCall("round_number", {"number": number, "decimal_places": places})
        return json.loads(env.step(call).content)

    assert rounded(1234.5678, 2) == {"result": 1234.57}
    assert rounded(5, -MAX_DECIMAL_PLACES) == {"result": 0}


@pytest.mark.parametrize("call, limited", [
    (ToolCall("round_number", {"number": 5, "decimal_places": -(10**8)}), True),
    (ToolCall("round_number", {"number": 5, "decimal_places": True}), False),
    (ToolCall("round_number", {"number": 5, "decimal_places": "-100000000"}), False),  # the method refuses
    (ToolCall("power", {"base": 10, "exponent": 10**9}), True),
    (ToolCall("power", {"base": 1e13, "exponent": 2}), True),
    (ToolCall("power", {"base": 2, "exponent": -1000}), False),
    (ToolCall("logarithm", {"value": 3, "base": 2, "precision": 101}), True),
    (ToolCall("square_root", {"number": 2, "precision": 100}), False),
    (ToolCall("mkdir", {"dir_name": "x" * 1000}), False),
])
def test_argument_limits(call, limited):
    assert (argument_problem(call) is not None) == limited


@pytest.mark.parametrize("scoring", Scoring)
def test_a_tree_nested_past_the_limit_is_refused_and_every_later_call_works(scoring):
    env = _env("GorillaFileSystem", scoring)
    refused = []
    for i in range(MAX_TREE_DEPTH + 150):  # past where recursion fails without the cap
        made = env.step(ToolCall("mkdir", {"dir_name": "d"}))
        if made.error:
            refused.append((i, made.content))
            break
        assert not env.step(ToolCall("cd", {"folder": "d"})).error
    assert refused and refused[0][0] == MAX_TREE_DEPTH  # the root's own folder is level 1
    assert f"deeper than {MAX_TREE_DEPTH} levels" in refused[0][1]
    for call in (ToolCall("touch", {"file_name": "leaf.txt"}), ToolCall("ls", {}), ToolCall("pwd", {}),
                 ToolCall("cd", {"folder": "/"}), ToolCall("find", {}), ToolCall("du", {})):
        result = env.step(call)
        assert not result.error and "Recursion" not in result.content, (call.name, result.content)
    assert env.outcome().details["scoring"] == scoring  # the state comparison recurses too: it works


@pytest.mark.parametrize("scoring", Scoring)
def test_a_folder_copied_into_itself_is_refused_and_changes_nothing(scoring):
    env = _env("GorillaFileSystem", scoring)
    env.step(ToolCall("mkdir", {"dir_name": "a"}))
    before = _fs_state(env)
    result = env.step(ToolCall("cp", {"source": "a", "destination": "a"}))
    assert result.error and json.loads(result.content)["error"].startswith("cp: the directory tree")
    assert _fs_state(env) == before
    assert json.loads(env.step(ToolCall("find", {})).content) == {"matches": ["./a"]}


@pytest.mark.parametrize("scoring", Scoring)
def test_copies_that_double_the_tree_are_capped(scoring):
    env = _env("GorillaFileSystem", scoring)
    for call in (ToolCall("mkdir", {"dir_name": "a"}), ToolCall("cd", {"folder": "a"}),
                 ToolCall("touch", {"file_name": "f"}), ToolCall("cd", {"folder": ".."})):
        env.step(call)
    moves = [("a", "c"), ("b", "c"), ("c", "a")]
    round_ = [ToolCall("cp", {"source": "a", "destination": "b"}), ToolCall("mkdir", {"dir_name": "c"}),
              *(ToolCall("mv", {"source": a, "destination": b}) for a, b in moves)]
    refusals = [r.content for _ in range(40) for r in (env.step(c) for c in round_) if "entries" in r.content]
    assert refusals and f"more than {MAX_TREE_ENTRIES} entries" in refusals[0]
    assert tree_problem(env.instances["GorillaFileSystem"]) is None
    found = env.step(ToolCall("find", {}))
    assert not found.error and env.timeouts == 0


def test_a_task_whose_tree_is_too_deep_is_a_task_error():
    contents: dict = {}
    root = {"type": "directory", "contents": contents}
    for _ in range(MAX_TREE_DEPTH + 5):
        inner: dict = {}
        contents["d"] = {"type": "directory", "contents": inner}
        contents = inner
    with pytest.raises(TaskError, match="initial_config.GorillaFileSystem: the directory tree"):
        _env("GorillaFileSystem", "corrected", {"GorillaFileSystem": {"root": {"home": root}}})
