"""Which rules judge an outcome: a benchmark's official code, or named corrections of it.

`Scoring` is a `str` enum, so the mode reads and writes as the plain words ``official`` and
``corrected`` in YAML, on the command line and in JSON outputs.
"""

from __future__ import annotations

from enum import StrEnum


class Scoring(StrEnum):
    """The rule set a verdict or an environment's outcome is judged under.

    ``official``: the benchmark's own code, rule for rule, its bugs included (the numbers to report
    under the benchmark's name; the default of every entry point that reports a benchmark's number).
    ``corrected``: each deviation from it a named fix (docs/evaluation.md); the environments' training
    signal, chosen by name by the training code."""

    OFFICIAL = "official"
    CORRECTED = "corrected"

    @classmethod
    def of(cls, value: str) -> Scoring:
        """`value` as a `Scoring`; ValueError naming the modes otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"scoring must be one of {', '.join(cls)}, got {value!r}") from None
