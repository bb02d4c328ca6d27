"""What every benchmark's scorer returns: one `Verdict` per entry, and per-category accuracy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class Verdict:
    """The outcome of one benchmark entry: valid or not, with the reason when not."""

    id: str
    category: str
    valid: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "category": self.category, "valid": self.valid, "error": self.error}


def category_accuracy(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """{category: {accuracy, correct, total}} from verdict records."""
    counts: dict[str, list[int]] = {}
    for r in records:
        c = counts.setdefault(r["category"], [0, 0])
        c[0] += bool(r["valid"])
        c[1] += 1
    return {k: {"accuracy": ok / n, "correct": ok, "total": n} for k, (ok, n) in sorted(counts.items())}
