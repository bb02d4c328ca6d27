"""Held-out evaluation of the quickstart: greedy exact match per category, pass@k, paired statistics.

Exact match is Tool-N1's binary reward (format right AND calls equal the ground truth), so evaluation
and the GRPO reward agree by construction. Standard errors are binomial, sqrt(p(1-p)/n); the
difference between two checkpoints on the same examples uses the paired standard error
sd(d_i)/sqrt(n) of the per-example differences d_i in {-1, 0, 1}, which is what "more than three
standard errors above" is measured with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tooltune.generation import Sampling, score_samples
from tooltune.schema import Sample


def score(
    backend: Any,
    samples: Sequence[Sample],
    template: str,
    n: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 80,
    seed: int | None = None,
) -> list[list[float]]:
    """Binary reward of `n` completions per sample (greedy when temperature is 0)."""
    sampling = Sampling(temperature=temperature, max_new_tokens=max_new_tokens, batch_size=0)
    return score_samples(backend, samples, template, n, sampling, seeds=seed)


def binomial(hits: Sequence[float]) -> dict[str, float]:
    n = len(hits)
    p = sum(hits) / n if n else float("nan")
    return {"accuracy": p, "se": math.sqrt(p * (1 - p) / n) if n else float("nan"), "n": n}


def summarize(hits: Sequence[float], samples: Sequence[Sample]) -> dict[str, Any]:
    """Overall and per-category accuracy with standard errors."""
    out = binomial(hits)
    cats: dict[str, list[float]] = {}
    for h, s in zip(hits, samples, strict=True):
        cats.setdefault(s.category, []).append(h)
    out["per_category"] = {c: binomial(v) for c, v in sorted(cats.items())}
    return out


def paired(after: Sequence[float], before: Sequence[float]) -> dict[str, float]:
    """Mean difference after - before on the same examples, its paired standard error and z."""
    d = [a - b for a, b in zip(after, before, strict=True)]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / max(1, n - 1)
    se = math.sqrt(var / n)
    return {"diff": mean, "se": se, "z": mean / se if se > 0 else (math.inf if mean > 0 else 0.0)}


def evaluate(
    backend: Any, samples: Sequence[Sample], template: str, max_new_tokens: int = 80
) -> dict[str, Any]:
    """Greedy exact match on `samples`: summary plus the per-example hits (kept for paired tests)."""
    hits = [r[0] for r in score(backend, samples, template, max_new_tokens=max_new_tokens)]
    return {**summarize(hits, samples), "hits": hits}


def pass_at_k(
    backend: Any,
    samples: Sequence[Sample],
    template: str,
    k: int = 8,
    temperature: float = 1.0,
    max_new_tokens: int = 80,
    seed: int = 0,
) -> dict[str, Any]:
    """pass@k: share of samples where at least one of k sampled completions is exactly right."""
    rewards = score(
        backend, samples, template, n=k, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed
    )
    hits = [1.0 if max(r) > 0 else 0.0 for r in rewards]
    mixed = sum(1 for r in rewards if 0 < sum(r) < len(r)) / len(rewards)
    return {
        **summarize(hits, samples),
        "k": k,
        "temperature": temperature,
        "mixed_groups": mixed,
        "mean_reward": sum(sum(r) / len(r) for r in rewards) / len(rewards),
    }
