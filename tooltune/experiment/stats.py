"""Statistics of the quickstart's evaluations: binomial standard errors and paired differences.

Standard errors are binomial, sqrt(p(1-p)/n); the difference between two checkpoints on the same
examples uses the paired standard error sd(d_i)/sqrt(n) of the per-example differences
d_i in {-1, 0, 1}, which is what "more than three standard errors above" is measured with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tooltune.schema import Sample


def binomial(hits: Sequence[float]) -> dict[str, float]:
    n = len(hits)
    p = sum(hits) / n if n else float("nan")
    return {"accuracy": p, "se": math.sqrt(p * (1 - p) / n) if n else float("nan"), "n": n}


def summarize(hits: Sequence[float], samples: Sequence[Sample]) -> dict[str, Any]:
    """Overall and per-category accuracy with standard errors."""
    out: dict[str, Any] = dict(binomial(hits))
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
