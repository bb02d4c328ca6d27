"""The ``synthetic_chain`` environment: known results, lookups, and an outcome judged with
`tooltune.matching`'s comparison of calls (typed values, order free), never a second one."""

from __future__ import annotations

import json

from tooltune.environments import make_environment
from tooltune.environments.base import call_text
from tooltune.matching import call_key, calls_match
from tooltune.schema import Sample, ToolCall

FIND = {"name": "find_station", "description": "The next stop of a train.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
BOOK = {"name": "book_seats", "description": "Book seats.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string"}, "seats": {"type": "number"}},
                       "required": ["city", "seats"]}}
FIRST = ToolCall("find_station", {"city": "Sydney"})
SECOND = ToolCall("book_seats", {"city": "Paris", "seats": 2})


def _task() -> Sample:
    env = {"name": "synthetic_chain", "goal": [FIRST.to_dict(), SECOND.to_dict()],
           "results": [[FIRST.to_dict(), {"next": "Paris"}]],
           "lookups": {"find_station": {"field": "next", "values": ["Rome", "Oslo", "Paris"]}}}
    return Sample(id="chain", source="unit", category="multi_step",
                  messages=[{"role": "user", "content": "train from Sydney, then book 2 seats"}],
                  tools=[FIND, BOOK], answer=[FIRST], meta={"env": env})


def _run(*calls: ToolCall):
    env = make_environment("synthetic_chain")
    env.reset(_task())
    results = [env.step(c) for c in calls]
    return env, results


def test_the_known_result_and_a_plausible_wrong_value():
    _, (right, wrong) = _run(FIRST, ToolCall("find_station", {"city": "Cairo"}))
    assert json.loads(right.content) == {"next": "Paris"} and not right.error
    seen = json.loads(wrong.content)
    assert list(seen) == ["next"] and seen["next"] in ("Rome", "Oslo", "Paris")


def test_success_is_matchings_multiset_equality_in_any_order():
    reordered = ToolCall("book_seats", {"seats": 2, "city": "Paris"})  # argument order is free
    env, _ = _run(reordered, FIRST)
    out = env.outcome()
    assert out.success and out.score == 1.0 and out.details == {"missing": [], "extra": []}
    assert calls_match(env.state, env.goal)


def test_a_value_of_another_type_is_another_call():
    float_seats = ToolCall("book_seats", {"city": "Paris", "seats": 2.0})  # "number" accepts 2.0
    env, results = _run(FIRST, float_seats)
    assert not results[1].error
    out = env.outcome()
    assert not out.success and out.score == 0.0
    assert out.details == {"missing": [call_text(SECOND)], "extra": [call_text(float_seats)]}
    assert out.success == calls_match(env.state, env.goal)


def test_a_repeated_call_is_an_extra_call():
    env, _ = _run(FIRST, SECOND, SECOND)
    out = env.outcome()
    assert not out.success and out.details == {"missing": [], "extra": [call_text(SECOND)]}


def test_call_text_is_matchings_identity_of_a_call():
    variants = [FIRST, SECOND, ToolCall("book_seats", {"seats": 2, "city": "Paris"}),
                ToolCall("book_seats", {"city": "Paris", "seats": 2.0}),
                ToolCall("book_seats", {"city": "Paris", "seats": "2"})]
    for a in variants:
        for b in variants:
            assert (call_text(a) == call_text(b)) == (call_key(a) == call_key(b))
    assert call_text(SECOND) == 'book_seats{"city": "Paris", "seats": 2}'
