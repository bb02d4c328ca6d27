"""Gold self-check: every sample's ground truth, rendered in a template, must earn binary reward 1.0.

It catches answers the parser cannot read back (values that break the grammar, unsupported types),
renderer/parser drift, and broken records, before any training step is spent on them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from tooltune.prompts import render_target
from tooltune.rewards import binary_reward
from tooltune.schema import Sample, read_jsonl

SPLIT_FILES = ("train.jsonl", "val.jsonl")


@dataclass
class ValidationReport:
    template: str
    total: int = 0
    passed: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.total == self.passed


def check_samples(
    samples: Iterable[Sample],
    template: str = "tool_n1",
    report: ValidationReport | None = None,
    where: str = "",
) -> ValidationReport:
    report = report or ValidationReport(template)
    for s in samples:
        report.total += 1
        text = render_target(s, template)
        answer = [c.to_dict() for c in s.answer]
        score = binary_reward(text, answer, template=template)
        if score == 1.0:
            report.passed += 1
        else:
            report.failures.append({"id": s.id, "file": where, "score": str(score), "completion": text[:500]})
    return report


def validate_path(path: str, template: str = "tool_n1") -> ValidationReport:
    """`path` is a prepared folder (train.jsonl and val.jsonl) or one canonical JSONL file.

    A line that cannot be read (not UTF-8 or not JSON, too deep, NaN, not a sample) stops the check with
    a SchemaError naming `file:line` and the cause (`tooltune.schema.read_jsonl`)."""
    files = (
        [os.path.join(path, f) for f in SPLIT_FILES if os.path.isfile(os.path.join(path, f))]
        if os.path.isdir(path)
        else [path]
    )
    if not files:
        raise FileNotFoundError(f"{path}: no train.jsonl or val.jsonl to validate")
    report = ValidationReport(template)
    for f in files:
        check_samples(read_jsonl(f), template, report, where=f)
    return report
