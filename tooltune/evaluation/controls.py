"""The protocol controls: every choice that moves a tool-calling score, recorded with the result.

The efficiency paper (arXiv 2606.00135) shows tool-calling scores move with the seed, the system prompt,
how multi-turn history is serialized and whether earlier reasoning is kept; so every such choice is
an explicit control, written to `manifest.json` beside the scores (`tooltune.evaluation.manifest`).
`Controls` holds the choices every benchmark shares; a benchmark with options of its own declares a
subclass as its `Benchmark.controls_type` (BFCL's `BfclControls`: the name style), whose fields become
that benchmark's flags and manifest fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

from tooltune.config import option
from tooltune.prompts import PromptControls
from tooltune.schema import Scoring

C = TypeVar("C", bound="Controls")


@dataclass
class Controls(PromptControls):
    """The choices that move tool-calling scores; every one is recorded with the result.

    The prompt controls (template, system_prompt, history, keep_reasoning; their checks, `resolve()`,
    `system_text()` and `system_sha256(extra)`) come from `tooltune.prompts.PromptControls`. Each field
    is a `tooltune eval` flag of the same name (`--keep-reasoning false`, `--scoring corrected`),
    generated from this declaration."""

    mode: str = option("strict", "Format mode of the completion parser.", ("strict", "substring"))
    scoring: Scoring = option(
        Scoring.OFFICIAL,
        "Scoring rules: official (the benchmark's official code, rule for rule, its bugs included: the "
        "numbers to report under the benchmark's name) or corrected (each deviation a named fix listed in "
        "docs/evaluation.md).",
        tuple(Scoring),
    )

    def __post_init__(self) -> None:
        if self.scoring in tuple(Scoring):  # a plain word given in code reads as the typed mode
            self.scoring = Scoring(self.scoring)

    @classmethod
    def cast(cls: type[C], controls: Controls) -> C:
        """`controls` as this class: the fields both share keep their values, a field only this class has
        takes its default, a field it lacks is dropped; a template resolved for a model
        (`with_template`) is kept. Library callers may hand any benchmark plain `Controls`; the
        benchmark reads its own options, and records them, through this."""
        if type(controls) is cls:
            return controls
        own = {f.name for f in dataclasses.fields(cls)}
        shared = {f.name: getattr(controls, f.name) for f in dataclasses.fields(controls) if f.name in own}
        out = cls(**shared)
        resolved = controls._model_template  # set by with_template only (PromptControls, our base)
        return out if resolved is None else out.with_template(resolved)
