"""Selection recipes: R2IF balanced set and the policy-based difficulty filter on the shared backend API."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tooltune.data.recipes import (
    R2IF_CATEGORIES,
    DifficultyConfig,
    balanced_set,
    cached_cost,
    difficulty_filter,
)
from tooltune.data.synthetic import SynthConfig, generate
from tooltune.generation import BackendError, ScriptedBackend
from tooltune.prompts import render_answer
from tooltune.schema import Sample, ToolCall


@pytest.fixture(scope="module")
def samples() -> list[Sample]:
    return [Sample.from_dict(r) for r in generate(SynthConfig(n=300, seed=9))]


def test_balanced_set_equal_counts(samples):
    chosen, report = balanced_set(samples, seed=1)
    counts = Counter(s.category for s in chosen)
    assert set(counts) == set(R2IF_CATEGORIES) and len(set(counts.values())) == 1
    assert counts["simple"] == min(report["available"].values())
    assert report["ignored"] == sum(s.category == "multi_step" for s in samples)
    few, rep = balanced_set(samples, per_category=3, seed=1)
    assert len(few) == 15 and rep["shortfall"] == {}
    assert [s.id for s in few] == [s.id for s in balanced_set(samples, per_category=3, seed=1)[0]]
    _, rep = balanced_set(samples, per_category=10_000)
    assert set(rep["shortfall"]) == set(R2IF_CATEGORIES)


def _policy(by_id: dict[str, Sample]):
    """Solves even-indexed samples always, odd ones with index % 3 == 1 never, the rest half the time."""

    def fn(request):
        s = by_id[request.id]
        i = s.meta["index"]
        right = render_answer(s.answer, "tool_n1")
        wrong = render_answer([ToolCall("nope", {})], "tool_n1")
        if i % 2 == 0:
            return [right] * request.n
        if i % 3 == 1:
            return [wrong] * request.n
        return [right, wrong] * (request.n // 2)

    return fn


def test_difficulty_filter_drops_always_and_never_solved(samples, tmp_path: Path):
    subset = samples[:40]
    by_id = {s.id: s for s in subset}
    cache = tmp_path / "cache.jsonl"
    cfg = DifficultyConfig(k=4, batch_size=7, cache=str(cache), progress=False)
    kept, rejected, stats = difficulty_filter(subset, ScriptedBackend(fn=_policy(by_id)), cfg)
    assert len(kept) + len(rejected) == len(subset) == stats["in"]
    reasons = {r["sample_id"]: r["reason"] for r in rejected}
    for s in subset:
        i = s.meta["index"]
        expect = "always_solved" if i % 2 == 0 else "never_solved" if i % 3 == 1 else None
        assert reasons.get(s.id) == expect
    assert all(s.meta["policy_success_rate"] == 0.5 for s in kept)
    assert len(cache.read_text().splitlines()) == len(subset)

    def broken(_request):
        raise BackendError("the cache should have answered")

    kept2, rejected2, _ = difficulty_filter(subset, ScriptedBackend(fn=broken), cfg)  # resumes from the cache
    assert [s.id for s in kept2] == [s.id for s in kept] and len(rejected2) == len(rejected)


def test_the_cache_records_what_each_prompt_cost_so_a_reuse_can_count_it(samples, tmp_path: Path):
    subset = samples[:10]
    cache = tmp_path / "cache.jsonl"
    cfg = DifficultyConfig(k=2, batch_size=4, cache=str(cache), progress=False)
    difficulty_filter(subset, ScriptedBackend(fn=_policy({s.id: s for s in subset})), cfg)
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    assert all(r["cpu_s"] >= 0 and r["wall_s"] >= 0 for r in records)
    cost = cached_cost(str(cache), [s.id for s in subset[:6]])
    assert cost["n"] == 6 and cost["without_cost"] == 0
    assert cost["cpu_s"] == pytest.approx(sum(r["cpu_s"] for r in records[:6]))
    # records without a cost (an older cache), a torn line and prompts not asked for
    with cache.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"sample_id": "old", "rewards": [1.0, 0.0]}) + "\n" + '{"sample_id": "torn", "rew')
    cost = cached_cost(str(cache), ["old", "torn", subset[0].id, "missing"])
    assert (cost["n"], cost["without_cost"]) == (2, 1) and cost["cpu_s"] == records[0]["cpu_s"]
    assert cached_cost(str(tmp_path / "none.jsonl"), ["x"]) == {"cpu_s": 0.0, "wall_s": 0.0, "n": 0,
                                                                "without_cost": 0}
