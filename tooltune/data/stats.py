"""Per-source accounting of the preparation pipeline and its Tool-N1 Table 1 style summary.

Identities checked by `SourceStats.check()` (see `tooltune.data.pipeline`):
  records_in = records_kept + sum(records_rejected by reason)
  samples_produced + samples_augmented = samples_kept + sum(samples_rejected by reason)
  samples_kept = train + val
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class SourceStats:
    """Counts for one source; `check()` asserts the accounting identities."""

    records_in: int = 0
    records_single_turn: int = 0
    records_multi_turn: int = 0
    records_kept: int = 0
    records_rejected: Counter = field(default_factory=Counter)
    samples_produced: int = 0
    samples_augmented: int = 0
    samples_kept: int = 0
    kept_from_single_turn: int = 0
    kept_from_multi_turn: int = 0
    samples_rejected: Counter = field(default_factory=Counter)
    train: int = 0
    val: int = 0
    categories: Counter = field(default_factory=Counter)

    def check(self) -> None:
        rec = self.records_kept + sum(self.records_rejected.values())
        smp = self.samples_kept + sum(self.samples_rejected.values())
        if (
            rec != self.records_in
            or smp != self.samples_produced + self.samples_augmented
            or self.train + self.val != self.samples_kept
        ):
            raise AssertionError(f"accounting broken: {self.to_dict()}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("records_rejected", "samples_rejected", "categories"):
            d[k] = dict(sorted(getattr(self, k).items()))
        return d


def total(stats: dict[str, SourceStats]) -> SourceStats:
    out = SourceStats()
    for st in stats.values():
        for k, v in vars(st).items():
            setattr(out, k, getattr(out, k) + v)
    return out


def format_table(stats: dict[str, SourceStats]) -> str:
    """A Tool-N1 Table 1 style summary: raw records (single/multi-turn) -> processed samples."""
    head = (
        "source",
        "raw",
        "single",
        "multi",
        "rej.rec",
        "samples",
        "rej.smp",
        "kept",
        "from single",
        "from multi",
        "train",
        "val",
    )
    rows = [head]
    for name, st in [*stats.items(), ("total", total(stats))]:
        rows.append(
            (
                name,
                st.records_in,
                st.records_single_turn,
                st.records_multi_turn,
                sum(st.records_rejected.values()),
                st.samples_produced + st.samples_augmented,
                sum(st.samples_rejected.values()),
                st.samples_kept,
                st.kept_from_single_turn,
                st.kept_from_multi_turn,
                st.train,
                st.val,
            )
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    lines = [
        "  ".join(str(v).rjust(w) if i else str(v).ljust(w) for i, (v, w) in enumerate(zip(r, widths)))
        for r in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    reasons = Counter()
    for st in stats.values():
        reasons.update({f"record:{k}": v for k, v in st.records_rejected.items()})
        reasons.update({f"sample:{k}": v for k, v in st.samples_rejected.items()})
    if reasons:
        lines.append("rejected by reason: " + ", ".join(f"{k}={v}" for k, v in sorted(reasons.items())))
    return "\n".join(lines)
