"""Gold self-check: every sample's ground truth, rendered in a template, must earn binary reward 1.0.

It catches answers the parser cannot read back (values that break the grammar, unsupported types),
renderer/parser drift, and broken records, before any training step is spent on them. The verdict is
the binary reward's (`tooltune.matching.exact_match`: strict format, exact calls); the template (or
grammar) is looked up once per check.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from tooltune.matching import exact_match
from tooltune.parsing import Grammar
from tooltune.prompts import TEMPLATES, PromptTemplate, get_template, grammar_for, render_target
from tooltune.schema import Sample, iter_jsonl

SPLIT_FILES = ("train.jsonl", "val.jsonl")


KEPT_FAILURES = 1000
"""Failures a report keeps in full (the first ones); beyond them it only counts, so that checking a
large file stays within the memory of one sample whatever fails."""


@dataclass
class ValidationReport:
    template: str
    total: int = 0
    passed: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)
    """The first `keep` failures: id, file, score and the rendered completion (first 500 characters)."""
    keep: int = KEPT_FAILURES

    @property
    def ok(self) -> bool:
        return self.total == self.passed

    @property
    def failed(self) -> int:
        """All failing samples, kept or only counted."""
        return self.total - self.passed


def check_samples(
    samples: Iterable[Sample],
    template: str | PromptTemplate = "tool_n1",
    report: ValidationReport | None = None,
    where: str = "",
) -> ValidationReport:
    """Render each sample's ground truth in `template` (a template or grammar name, or a template value
    resolved for a model's own format, `tooltune.prompts.resolve_native`) and parse it back;
    a sample passes when the verdict is 1.0 (added to `report`, or to a new one). A ground truth the
    template's format cannot carry (`render_target` raises ValueError) fails with the reason."""
    report = report or ValidationReport(template if isinstance(template, str) else template.name)
    grammar = grammar_for(template)
    answers: PromptTemplate | Grammar = (
        get_template(template)
        if isinstance(template, PromptTemplate) or template in TEMPLATES or ":" in template
        else grammar
    )
    for s in samples:
        report.total += 1
        try:
            text = render_target(s, answers)
        except ValueError as e:  # a format that cannot carry this answer (one call per turn, say)
            text, score = f"(not renderable: {e})", 0.0
        else:
            score = exact_match(text, s.answer, grammar)
        if score == 1.0:
            report.passed += 1
        elif len(report.failures) < report.keep:
            report.failures.append({"id": s.id, "file": where, "score": str(score), "completion": text[:500]})
    return report


def validate_path(path: str, template: str | PromptTemplate = "tool_n1") -> ValidationReport:
    """`path` is a prepared folder (train.jsonl and val.jsonl) or one canonical JSONL file.

    The files are streamed (`tooltune.schema.iter_jsonl`): memory stays that of one sample plus the kept
    failures, whatever the file's size. A line that cannot be read (not UTF-8 or not JSON, too deep,
    NaN, not a sample) stops the check with a SchemaError naming `file:line` and the cause."""
    files = (
        [os.path.join(path, f) for f in SPLIT_FILES if os.path.isfile(os.path.join(path, f))]
        if os.path.isdir(path)
        else [path]
    )
    if not files:
        raise FileNotFoundError(f"{path}: no train.jsonl or val.jsonl to validate")
    report = ValidationReport(template)
    for f in files:
        check_samples(iter_jsonl(f), template, report, where=f)
    return report
