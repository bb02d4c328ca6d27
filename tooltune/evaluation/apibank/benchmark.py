"""API-Bank as a registered `Benchmark`: level-1 and level-2 requests scored one completion at a time
(`scoring`, official or corrected rules), accuracy per level and the count-weighted
overall."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from tooltune.evaluation import apibank
from tooltune.evaluation.benchmark import (
    AceGold,
    Benchmark,
    Prepared,
    ProvidesAceGold,
    answer_policy,
    format_decided,
    register_benchmark,
    single_turn_task,
    split_categories,
)
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import GenerationRequest
from tooltune.prompts import render_answer
from tooltune.schema import Sample


def _score(sample: Sample, level: str, controls: Controls, text: str) -> Verdict:
    return apibank.score(sample, level, text, controls.prompt_template, controls.mode,
                         scoring=controls.scoring)


@register_benchmark
class ApiBankBenchmark(ProvidesAceGold, Benchmark):
    name = "apibank"
    help = "API-Bank level-1 / level-2 API-call accuracy."

    def prepare(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Prepared:
        levels = split_categories(categories) or list(apibank.LEVELS)
        decided = format_decided(controls)  # a failed format is a failed request
        tasks = [single_turn_task(s, lv, controls, partial(_score, s, lv, controls), decided=decided)
                 for lv, s in apibank.load_samples(data_dir, levels)]
        # official verdicts compare with the dialogues' recorded results: their files are inputs too
        files = apibank.data_files(data_dir, levels) + apibank.dialogue_files(data_dir, levels)
        return Prepared(tasks, files)

    def scores(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return apibank.scores(records)

    def answers(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Callable[[GenerationRequest], str]:
        levels = split_categories(categories) or list(apibank.LEVELS)
        return answer_policy({s.id: render_answer(s.answer, controls.prompt_template)
                              for _, s in apibank.load_samples(data_dir, levels)})

    def ace_gold(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                 ) -> AceGold:
        levels = split_categories(categories) or list(apibank.LEVELS)
        gold = {s.id: s.answer for _, s in apibank.load_samples(data_dir, levels)}
        return AceGold(levels, levels, gold, {})
