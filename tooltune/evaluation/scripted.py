"""Ground-truth players for every benchmark: the harness's own check that a perfect model scores 100%.

Single-turn BFCL: the first acceptable value of each argument (see `bfcl_truth`); irrelevance: a
no-call answer; live_relevance (any call passes): a call of the first offered function. Multi-turn:
`bfcl_multiturn.scripted_policy`. API-Bank: the expected request. ACEBench: the expected call, or the
expected sentence for special entries.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from tooltune.evaluation import acebench, apibank, bfcl
from tooltune.evaluation.bfcl_multiturn import scripted_policy
from tooltune.generation import GenerationRequest, MissingPrediction
from tooltune.prompts import render_answer
from tooltune.schema import ToolCall


def bfcl_answers(categories: Sequence[str] | str | None, template: str = "tool_n1",
                 name_style: str = "dotted") -> tuple[dict[str, str], list[Any]]:
    """(id -> ground-truth completion for single-turn entries, the multi-turn entries)."""

    answers, multi = {}, []
    for e in bfcl.load_entries(bfcl.expand_categories(categories)):
        if e.category in bfcl.MULTI_TURN:
            multi.append(e)
        elif "irrelevance" in e.category:
            answers[e.id] = render_answer([], template)
        elif e.category == "live_relevance":
            name = bfcl.rename_dotted(e.entry["function"][0]["name"], name_style)
            answers[e.id] = render_answer([ToolCall(name, {})], template)
        else:
            answers[e.id] = render_answer(bfcl.ground_truth_calls(e, name_style), template)
    return answers, multi


def ground_truth_policy(
    benchmark: str,
    template: str = "tool_n1",
    categories: Sequence[str] | str | None = None,
    data_dir: str | os.PathLike | None = None,
    name_style: str = "dotted",
) -> Callable[[GenerationRequest], str]:
    """A `ScriptedBackend` function answering every entry of `benchmark` with its ground truth."""
    multi_play: Callable[[GenerationRequest], str] | None = None
    if benchmark == "bfcl":

        answers, multi = bfcl_answers(categories, template, name_style)
        multi_play = scripted_policy(multi, template) if multi else None
    elif benchmark == "apibank":

        levels = list(apibank.LEVELS) if categories in (None, "all") else str(categories).split(",")
        answers = {s.id: render_answer(s.answer, template) for _, s in apibank.load_samples(data_dir, levels)}
    elif benchmark == "acebench":

        cats = acebench.categories_in(data_dir) if categories in (None, "all") else str(categories).split(",")
        answers = {s.id: acebench.reference_answer(s, c, template)
                   for c, s in acebench.load_samples(data_dir, cats)}
        agent = acebench.load_agent_entries(data_dir, cats)
        multi_play = acebench.agent_scripted_policy(agent, template) if agent else None
    else:
        raise ValueError(f"unknown benchmark {benchmark!r}")

    def play(r: GenerationRequest) -> str:
        if "turn" in r.meta and multi_play is not None:
            return multi_play(r)
        if r.id not in answers:
            raise MissingPrediction(f"no ground truth for id {r.id!r}")
        return answers[r.id]

    return play
