"""BFCL as a registered `Benchmark`: single-turn and relevance entries scored by bfcl-eval's checker
(`scoring`), multi-turn entries played and checked by `multiturn`, the leaderboard's aggregates.

Single-turn verdicts are the official checker's in both scoring modes (there is nothing to correct);
multi-turn follows `Controls.scoring` (see `multiturn`). BFCL's own option, the style of dotted function
names, is a field of its controls (`BfclControls`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune.config import option
from tooltune.evaluation import bfcl
from tooltune.evaluation.benchmark import (
    AceGold,
    Benchmark,
    EpisodeContext,
    Prepared,
    ProvidesAceGold,
    Task,
    answer_policy,
    format_decided,
    register_benchmark,
    single_turn_task,
)
from tooltune.evaluation.bfcl.data import FORMAT_SENSITIVITY, MEMORY
from tooltune.evaluation.bfcl.format_sensitivity import FormatScorer, question_id
from tooltune.evaluation.bfcl.format_sensitivity import figure as format_figure
from tooltune.evaluation.bfcl.format_sensitivity import ground_truth_answers as format_answers
from tooltune.evaluation.bfcl.format_sensitivity import load_entries as load_format_entries
from tooltune.evaluation.bfcl.format_sensitivity import messages as format_messages
from tooltune.evaluation.bfcl.memory import RESULT_FOLDER, is_memory_id, load_memory, run_memory, score_memory
from tooltune.evaluation.bfcl.memory import scripted_policy as memory_policy
from tooltune.evaluation.bfcl.multiturn import MultiTurnConfig, run_multi_turn, scripted_policy
from tooltune.evaluation.bfcl.official import score_multi_turn
from tooltune.evaluation.controls import Controls
from tooltune.generation import GenerationRequest, MissingPrediction
from tooltune.prompts import render_answer
from tooltune.schema import Scoring, ToolCall

TABLE2_COLUMNS = (
    ("Non-live simple", "table2.non_live.simple"), ("Non-live multiple", "table2.non_live.multiple"),
    ("Non-live parallel", "table2.non_live.parallel"),
    ("Non-live parallel multiple", "table2.non_live.parallel_multiple"),
    ("Non-live", "table2.non_live.overall"), ("Live simple", "table2.live.simple"),
    ("Live multiple", "table2.live.multiple"), ("Live parallel", "table2.live.parallel"),
    ("Live parallel multiple", "table2.live.parallel_multiple"), ("Live", "table2.live.overall"),
    ("Overall", "table2.overall"),
)
LEADERBOARD_COLUMNS = (("Non-live", "leaderboard.non_live"), ("Live", "leaderboard.live"),
                       ("Hallucination", "leaderboard.hallucination"), ("Relevance", "leaderboard.relevance"),
                       ("Multi-turn", "leaderboard.multi_turn"), ("Memory", "leaderboard.memory"),
                       ("Web search", "leaderboard.web_search"), ("Agentic", "leaderboard.agentic"),
                       ("Overall (v4)", "leaderboard.overall"))
PARTIAL_COLUMNS = (("Overall, partial (web search counted 0)", "leaderboard.overall_partial"),
                   ("Highest possible partial", "leaderboard.overall_ceiling"))
NOT_RUN = {"leaderboard.web_search": "not run (needs internet)",
           "leaderboard.agentic": "not computed (needs web search)",
           "leaderboard.overall": "not computed (needs web search)"}
"""Summary keys that are never computed offline, with what the report shows in their place."""

ACE_LEFT_OUT = {
    "live_relevance": "any call passes: no single correct call list",
    **{c: "multi-turn conversations are not single-turn entries" for c in bfcl.MULTI_TURN},
    **{c: "memory questions are answered in text after memory calls" for c in MEMORY},
    **{c: "format sensitivity answers in BFCL's formats, not the template's" for c in FORMAT_SENSITIVITY},
}
EPISODES = bfcl.MULTI_TURN + MEMORY
"""Categories played as conversations on the episode loop."""


@dataclass
class BfclControls(Controls):
    """The protocol controls plus BFCL's own option (`tooltune eval bfcl --name-style underscore`)."""

    name_style: str = option(
        "dotted",
        "BFCL dotted function names shown and expected as math.factorial (dotted) or math_factorial "
        "(underscore).",
        tuple(bfcl.NAME_STYLES),
    )


def bfcl_answers(categories: Sequence[str] | str | None, template: str = "tool_n1",
                 name_style: str = "dotted") -> tuple[dict[str, str], list[Any]]:
    """(id -> ground-truth completion for single-turn entries, the multi-turn entries).

    The first acceptable value of each argument (see `truth`); irrelevance: a no-call answer;
    live_relevance (any call passes): a call of the first offered function."""
    answers, multi = {}, []
    for e in bfcl.load_entries(bfcl.expand_categories(categories)):
        if e.category in EPISODES:
            multi.append(e)
        elif "irrelevance" in e.category:
            answers[e.id] = render_answer([], template)
        elif e.category == "live_relevance":
            name = bfcl.rename_dotted(e.entry["function"][0]["name"], name_style)
            answers[e.id] = render_answer([ToolCall(name, {})], template)
        else:
            answers[e.id] = render_answer(bfcl.ground_truth_calls(e, name_style), template)
    return answers, multi


def _run_episodes(entries: list[bfcl.BfclEntry], context: EpisodeContext) -> None:
    """Memory questions (`_run_memory`), then multi-turn entries (`_run_multi_turn`)."""
    memory = [e for e in entries if e.category in MEMORY]
    if memory:
        _run_memory(memory, context)
    multi = [e for e in entries if e.category not in MEMORY]
    if multi:
        _run_multi_turn(multi, context)


def _config(context: EpisodeContext) -> MultiTurnConfig:
    controls, sampling = context.controls, context.sampling
    return MultiTurnConfig(controls.prompt_template, controls.mode, controls.history,
                           controls.keep_reasoning, controls.system_text(), sampling.temperature,
                           sampling.max_new_tokens, context.seed)


def _run_memory(entries: list[bfcl.BfclEntry], context: EpisodeContext) -> None:
    """Memory questions: a predictions file is read as bfcl-eval reads a result file (the recorded steps
    are the result; its prerequisite conversations mattered only when it was generated); otherwise the
    prerequisite conversations and the questions are played (`memory.run_memory`), with the seed's
    snapshots under the run folder. Verdicts are BFCL's agentic checker's in both scoring modes."""
    controls = context.controls
    predictions = getattr(context.backend, "predictions", None)
    if isinstance(predictions, dict):
        for e in entries:
            result = predictions[e.id]
            context.record(score_memory(e, result, controls.prompt_template, controls.mode), result)
        return
    folder = None if context.run_dir is None else context.run_dir / RESULT_FOLDER / f"seed{context.seed}"
    run_memory(entries, context.backend, _config(context), context.record, folder,
               parallel=context.sampling.batch_size)


def _run_multi_turn(entries: list[bfcl.BfclEntry], context: EpisodeContext) -> None:
    """Multi-turn entries under `controls.scoring`: a predictions file scored officially is read as
    bfcl-eval reads a result file (no loop: its recorded steps are the result); otherwise the loop plays
    each entry (a model, or the replay rules of `ReplayBackend` under ``corrected``) and the recorded
    result is judged by the mode's rules."""
    controls, sampling = context.controls, context.sampling
    name_style = BfclControls.cast(controls).name_style
    predictions = getattr(context.backend, "predictions", None)
    if controls.scoring == Scoring.OFFICIAL and isinstance(predictions, dict):
        for e in entries:
            result = predictions[e.id]
            context.record(score_multi_turn(e, result, controls.prompt_template, controls.mode,
                                            name_style, scoring=Scoring.OFFICIAL), result)
        return
    run_multi_turn(entries, context.backend, _config(context), context.record, parallel=sampling.batch_size,
                   scoring=controls.scoring)


@register_benchmark
class BfclBenchmark(ProvidesAceGold, Benchmark):
    name = "bfcl"
    help = "BFCL with the official bfcl-eval checker (single-turn AST, relevance, multi-turn)."
    uses_data_dir = False
    controls_type = BfclControls
    scoring_packages = ("tooltune", "bfcl-eval")
    formulas = bfcl.FORMULAS
    report_tables = (("BFCL (Tool-N1 Table 2 columns, %)", TABLE2_COLUMNS),
                     ("BFCL v4 (leaderboard aggregates, %)", LEADERBOARD_COLUMNS),
                     ("BFCL v4 overall offline: partial, NOT the leaderboard's overall (%)", PARTIAL_COLUMNS))
    report_not_run = NOT_RUN

    def prepare(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Prepared[bfcl.BfclEntry]:
        name_style = BfclControls.cast(controls).name_style
        cats = bfcl.expand_categories(categories)
        configs = [c for c in cats if c in FORMAT_SENSITIVITY]
        entries = bfcl.load_entries([c for c in cats if c not in FORMAT_SENSITIVITY])
        scorer = bfcl.SingleTurnScorer(controls.prompt_template, controls.mode, name_style)
        decided = format_decided(controls)  # a failed format: "no call" (irrelevance) or a failed entry
        tasks = [single_turn_task(bfcl.entry_sample(e, name_style), e.category, controls,
                                  lambda text, e=e: scorer.score(e, text), decided=decided)
                 for e in entries if e.category not in EPISODES]
        episodes = [e for e in entries if e.category in EPISODES]
        skipped = []
        if configs and controls.prompt_template.chat_tools:
            skipped.append(f"format_sensitivity ({len(configs)} configurations): it measures prompt-based "
                           f"models; template {controls.template!r} gives the tools to the chat template")
            cats = [c for c in cats if c not in FORMAT_SENSITIVITY]
        elif configs:
            fs_scorer = FormatScorer()
            tasks += [Task(e.id, e.category, format_messages(e), lambda text, e=e: fs_scorer.score(e, text))
                      for e in load_format_entries(configs)]
        return Prepared(tasks, bfcl.data_files(cats), episodes, _run_episodes, skipped=skipped)

    def report_figures(self, summary: Mapping[str, Any], title: str) -> list[tuple[str, Any]]:
        """Format sensitivity's configurations as bars (`format_sensitivity.figure`), when it ran."""
        fig = format_figure(summary.get("mean_std", {}), title)
        return [] if fig is None else [("format_sensitivity", fig)]

    def subset_unit(self, entry_id: str, category: str) -> str:
        """A format-sensitivity entry's unit is its original question (the same questions under every
        configuration); every other entry is its own."""
        return question_id(entry_id) if category in FORMAT_SENSITIVITY else entry_id

    def scores(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return bfcl.scores(records)

    def answers(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Callable[[GenerationRequest], str]:
        cats = bfcl.expand_categories(categories)
        configs = [c for c in cats if c in FORMAT_SENSITIVITY]
        answers, episodes = bfcl_answers([c for c in cats if c not in FORMAT_SENSITIVITY],
                                         controls.prompt_template, BfclControls.cast(controls).name_style)
        answers |= format_answers(load_format_entries(configs)) if configs else {}
        multi = [e for e in episodes if e.category not in MEMORY]
        memory = sorted({e.category for e in episodes if e.category in MEMORY})
        players = {"multi": scripted_policy(multi, controls.prompt_template) if multi else None,
                   "memory": memory_policy({c: load_memory(c) for c in memory}, controls.prompt_template)
                   if memory else None}

        def play(r: GenerationRequest) -> str:
            player = players["memory"] if is_memory_id(r.id) else players["multi"]
            if player is None:
                raise MissingPrediction(f"no ground truth for id {r.id!r}")
            return player(r)

        return answer_policy(answers, play)

    def ace_gold(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                 ) -> AceGold:
        cats = bfcl.expand_categories("single_turn" if categories in (None, "") else categories)
        kept = [c for c in cats if c not in ACE_LEFT_OUT]
        name_style = BfclControls.cast(controls).name_style
        gold = {e.id: [] if "irrelevance" in e.category else bfcl.ground_truth_calls(e, name_style)
                for e in bfcl.load_entries(kept)}
        return AceGold(cats, kept, gold, {c: ACE_LEFT_OUT[c] for c in cats if c not in kept})
