"""The split by tool domain: held-out samples share no tool with training, the share is about the one
asked, and the split does not depend on the samples' order."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tooltune.data.domain_split import split_by_domain, tool_domains, tool_key
from tooltune.schema import Sample, ToolCall, ToolSpec


def _sample(i: int, tools: list[str]) -> Sample:
    return Sample(id=f"s{i}", source="test", category="simple",
                  messages=[{"role": "user", "content": f"q{i}"}], tools=[ToolSpec(t) for t in tools],
                  answer=[ToolCall(tools[0], {})] if tools else [])


def _names(samples: list[Sample]) -> set[str]:
    return {tool_key(t.name) for s in samples for t in s.tools}


def test_samples_sharing_a_tool_name_directly_or_through_others_are_one_domain() -> None:
    samples = [_sample(0, ["Get Weather"]), _sample(1, ["get_weather", "convert_units"]),
               _sample(2, ["convert-units"]), _sample(3, ["search_flights"]), _sample(4, [])]
    domains = sorted(sorted(d) for d in tool_domains(samples))
    assert domains == [[0, 1, 2], [3], [4]]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.sampled_from([f"tool_{k}" for k in range(30)]), min_size=1, max_size=3),
                min_size=5, max_size=60), st.integers(0, 5))
def test_no_held_out_tool_is_offered_in_training(tool_lists: list[list[str]], seed: int) -> None:
    samples = [_sample(i, tools) for i, tools in enumerate(tool_lists)]
    seen, held = split_by_domain(samples, 0.2, seed)
    assert len(seen) + len(held) == len(samples)
    assert not _names(seen) & _names(held)


def test_the_held_out_share_is_near_the_fraction_and_the_order_does_not_matter() -> None:
    samples = [_sample(i, [f"tool_{i // 2}"]) for i in range(200)]  # 100 domains of two samples
    seen, held = split_by_domain(samples, 0.15, seed=0)
    assert len(held) == 30 and len(seen) == 170
    shuffled = samples[:]
    random.Random(3).shuffle(shuffled)
    assert {s.id for s in split_by_domain(shuffled, 0.15, seed=0)[1]} == {s.id for s in held}
    assert {s.id for s in split_by_domain(samples, 0.15, seed=1)[1]} != {s.id for s in held}


def test_a_domain_larger_than_twice_the_share_stays_in_training() -> None:
    samples = [_sample(i, ["common"]) for i in range(50)] + [_sample(50 + i, [f"own_{i}"]) for i in range(10)]
    seen, held = split_by_domain(samples, 0.1, seed=0)
    assert len(held) == 6 and all(s.tools[0].name.startswith("own_") for s in held)
