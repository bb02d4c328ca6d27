"""ACEBench as a registered `Benchmark`: normal and special entries scored one completion at a time
(`scoring`), agent conversations played on the simulated APIs (`agent`), ACEBench's weighted summary.

agent_multi_turn needs a user simulator (`tooltune eval acebench --user-endpoint`, or, with `--scripted`,
`scripted_user`, who states the whole instruction); without one it is skipped and the summary says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from tooltune.evaluation.acebench import agent, data, scoring
from tooltune.evaluation.benchmark import (
    AceGold,
    Benchmark,
    EpisodeContext,
    Prepared,
    ProvidesAceGold,
    SimulatesUsers,
    answer_policy,
    format_decided,
    register_benchmark,
    single_turn_task,
    split_categories,
)
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import Backend, GenerationRequest, ScriptedBackend
from tooltune.schema import Sample

logger = logging.getLogger(__name__)

ACE_LEFT_OUT = {
    "special_incomplete": "the correct answer is a sentence naming the missing parameters, not calls",
    "special_error_param": "the correct answer is a sentence naming the wrong values, not calls",
    "agent_multi_step": "agent conversations are not single-turn entries",
    "agent_multi_turn": "agent conversations are not single-turn entries",
}


def _score(sample: Sample, category: str, controls: Controls, text: str) -> Verdict:
    return scoring.score(sample, category, text, controls.prompt_template, controls.mode,
                         scoring=controls.scoring)


def _run_agent(entries: list[agent.AgentEntry], context: EpisodeContext) -> None:
    controls, sampling = context.controls, context.sampling
    cfg = agent.AgentConfig(controls.prompt_template, controls.mode, controls.history,
                            controls.keep_reasoning, controls.system_text(), sampling.temperature,
                            sampling.max_new_tokens, context.seed, scoring=controls.scoring)
    agent.run_agent(entries, context.backend, cfg, context.record, context.user_backend,
                    parallel=sampling.batch_size)


@register_benchmark
class AceBenchBenchmark(SimulatesUsers, ProvidesAceGold, Benchmark):
    name = "acebench"
    help = "ACEBench normal + special categories (agent categories need a user-simulator endpoint)."
    user_categories = ("agent_multi_turn",)

    def _categories(self, categories: Sequence[str] | str | None, data_dir: Path | None) -> list[str]:
        return split_categories(categories) or data.categories_in(data_dir)

    def prepare(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Prepared[agent.AgentEntry]:
        """The entries of `categories`; agent_multi_turn is skipped (it needs a simulated user)."""
        return self._prepare(categories, controls, data_dir, user_simulator=False)

    def prepare_with_user(self, categories: Sequence[str] | str | None, controls: Controls,
                          data_dir: Path | None) -> Prepared[agent.AgentEntry]:
        return self._prepare(categories, controls, data_dir, user_simulator=True)

    def _prepare(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None,
                 user_simulator: bool) -> Prepared[agent.AgentEntry]:
        cats = self._categories(categories, data_dir)
        skipped = [] if user_simulator else [c for c in cats if c in self.user_categories]
        if skipped:
            logger.warning("%s", agent.USER_SIM_SKIP_MESSAGE)
        kept = [c for c in cats if c not in skipped]
        extra = scoring.SYSTEM_SUFFIX
        decided = format_decided(controls)  # normal entries: a failed format fails; special ones read text
        tasks = [single_turn_task(s, c, controls, partial(_score, s, c, controls), extra,
                                  decided if c.startswith("normal") else None)
                 for c, s in data.load_samples(data_dir, cats)]
        return Prepared(tasks, data.data_files(data_dir, kept), data.load_agent_entries(data_dir, kept),
                        _run_agent, extra, [f"{c}: {agent.USER_SIM_SKIP_MESSAGE}" for c in skipped])

    def scores(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return scoring.scores(records)

    def subset_unit(self, entry_id: str, category: str) -> str:
        """A normal_multi_turn dialogue is one unit (its turns are scored together)."""
        return scoring.dialogue_id(entry_id, category)

    def answers(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Callable[[GenerationRequest], str]:
        cats = self._categories(categories, data_dir)
        answers = {s.id: scoring.reference_answer(s, c, controls.prompt_template)
                   for c, s in data.load_samples(data_dir, cats)}
        entries = data.load_agent_entries(data_dir, cats)
        play_agent = agent.agent_scripted_policy(entries, controls.prompt_template) if entries else None
        return answer_policy(answers, play_agent)

    def ace_gold(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                 ) -> AceGold:
        cats = self._categories(categories, data_dir)
        kept = [c for c in cats if c not in ACE_LEFT_OUT]
        gold = {s.id: (s.answer if c.startswith("normal") else [])
                for c, s in data.load_samples(data_dir, kept)}
        return AceGold(cats, kept, gold, {c: ACE_LEFT_OUT[c] for c in cats if c not in kept})

    def scripted_user(self, data_dir: Path | None) -> Backend | None:
        """The scripted user, who states the whole instruction of each agent entry at once."""
        if data_dir is None:
            return None
        entries = data.load_agent_entries(data_dir, data.AGENT_CATEGORIES)
        return ScriptedBackend(agent.scripted_user_policy(entries), name="scripted-user")
