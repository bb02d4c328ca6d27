"""Generated tasks of the bfcl environment: solvable, deterministic, split, and never BFCL's own entries."""

from __future__ import annotations

import copy
import json

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")

from tooltune.config import UnknownName
from tooltune.data.synthetic.bfcl_heldout import (
    check_heldout,
    evaluation_entries,
    heldout_overlaps,
    parse_bfcl_call,
)
from tooltune.data.synthetic.bfcl_tasks import KINDS, generate_bfcl_tasks, split_of
from tooltune.environments.bfcl import BfclEnvironment, package_data_dir
from tooltune.schema import Sample, Scoring, ToolCall


@pytest.fixture(scope="module")
def train() -> list[Sample]:
    return generate_bfcl_tasks(2 * len(KINDS), seed=0)


@pytest.fixture(scope="module")
def heldout() -> list[Sample]:
    return generate_bfcl_tasks(len(KINDS), seed=0, split="heldout")


def _play(task: Sample, steps) -> BfclEnvironment:
    env = BfclEnvironment(Scoring.CORRECTED)
    env.reset(task)
    for step in steps:
        for call in step:
            env.step(ToolCall.from_dict(call))
    return env


def test_tasks_cover_every_kind_on_several_classes(train):
    assert {t.meta["kind"] for t in train} == set(KINDS)
    classes = {c for t in train for c in t.meta["env"]["involved_classes"]}
    assert classes >= {"GorillaFileSystem", "MessageAPI", "VehicleControlAPI", "TradingBot"}


def test_each_task_is_well_formed_and_solved_by_its_ground_truth_only(train):
    for t in train:
        env_spec = t.meta["env"]
        json.dumps(t.to_dict())  # stored as JSONL
        assert Sample.from_dict(json.loads(t.to_json())).meta == t.meta
        assert env_spec["name"] == "bfcl" and t.category == "multi_step"
        assert 5 <= len(t.tools) <= 20 and len(set(t.tool_names)) == len(t.tools)
        steps = env_spec["ground_truth"]
        assert {c["name"] for s in steps for c in s} <= set(t.tool_names)
        assert [c.to_dict() for c in t.answer] == steps[0]
        played = _play(t, steps)
        assert played.errors == 0 and played.outcome().success, t.id
        idle = _play(t, [])
        assert not idle.outcome().success, t.id  # every task changes the state or asks for a result
        if env_spec["required_responses"]:
            state_only = _play(t, steps)
            state_only.results.clear()
            assert not state_only.outcome().success
            assert state_only.outcome(env_spec["required_responses"][0]).success


def test_generation_is_deterministic_by_seed(train):
    again = generate_bfcl_tasks(2 * len(KINDS), seed=0)
    assert [t.to_dict() for t in again] == [t.to_dict() for t in train]
    other = generate_bfcl_tasks(len(KINDS), seed=1)
    assert {t.id for t in other}.isdisjoint({t.id for t in train})


def test_splits_are_disjoint(train, heldout):
    assert {t.meta["split"] for t in train} == {"train"} and {t.meta["split"] for t in heldout} == {"heldout"}
    key = lambda t: json.dumps([t.messages[0]["content"], t.meta["env"]["initial_config"]], sort_keys=True)  # noqa: E731
    assert {key(t) for t in train}.isdisjoint({key(t) for t in heldout})
    for t in heldout:
        assert split_of(t.messages[0]["content"], t.meta["env"]["initial_config"]) == "heldout"


def test_generated_tasks_are_not_bfcl_evaluation_entries(train, heldout):
    entries = evaluation_entries()
    assert entries.count >= 800 and entries.requests and entries.configs and entries.call_lists
    assert heldout_overlaps(train + heldout) == []
    check_heldout(train)


def _bfcl_entry() -> tuple[dict, list[list[str]]]:
    path = sorted(package_data_dir().glob("BFCL_v*_multi_turn_base.json"))[0]
    entry = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    answers = package_data_dir() / "possible_answer" / path.name
    truth = json.loads(answers.read_text(encoding="utf-8").splitlines()[0])["ground_truth"]
    return entry, truth


def test_the_check_catches_a_copied_request_state_or_ground_truth(train):
    entry, truth = _bfcl_entry()
    base = train[0]

    def variant(request=None, config=None, steps=None) -> Sample:
        d = copy.deepcopy(base.to_dict())
        d["id"] = "copy"
        if request is not None:
            d["messages"] = [{"role": "user", "content": "  " + request.upper() + " "}]
        env = d["meta"]["env"]
        if config is not None:
            env["initial_config"] = config
        if steps is not None:
            env["ground_truth"] = steps
        return Sample.from_dict(d)

    assert heldout_overlaps([variant(request=entry["question"][0][0]["content"])]) == [
        "copy: its request is a BFCL evaluation entry's"]
    assert heldout_overlaps([variant(config=entry["initial_config"])]) == [
        "copy: its initial_config is a BFCL evaluation entry's"]
    params = {"mv": ["source", "destination"], "cd": ["folder"], "mkdir": ["dir_name"]}
    steps = [[_call(s, params)] for s in truth[0]]
    assert heldout_overlaps([variant(steps=steps)]) == ["copy: its ground truth is a BFCL evaluation entry's"]
    with pytest.raises(ValueError, match="overlap"):
        check_heldout([variant(request=entry["question"][0][0]["content"])])


def _call(text: str, params: dict[str, list[str]]) -> dict:
    """A BFCL ground-truth string as a call object (through the same literal-only parser)."""
    key = parse_bfcl_call(text, params)
    name, args = key.split("{", 1)
    return {"name": name, "arguments": json.loads("{" + args)}


def test_bfcl_call_strings_are_parsed_as_literals_only():
    params = {"sort": ["file_name"]}
    assert parse_bfcl_call("sort('a.txt')", params) == 'sort{"file_name": "a.txt"}'
    for hostile in ("__import__('os').system('x')", "sort(open('f'))", "a.b(c=1)", "sort(**x)", "sort("):
        assert parse_bfcl_call(hostile, params) == hostile


def test_unknown_kind_or_split_is_refused():
    with pytest.raises(ValueError, match="split"):
        generate_bfcl_tasks(1, split="test")
    with pytest.raises(UnknownName, match="kinds: unknown task kind 'fs_delete_everything'.*; registered: "):
        generate_bfcl_tasks(1, kinds=["fs_delete_everything"])
    with pytest.raises(ValueError, match="at least one task kind"):
        generate_bfcl_tasks(1, kinds=[])
