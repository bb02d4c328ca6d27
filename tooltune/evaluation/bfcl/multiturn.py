"""BFCL multi-turn on the episode driver: BFCL's turns, its executor behind a safety check, its checker.

The loop is `tooltune.generation.episodes` (message view): per turn, at most `MAXIMUM_STEP_LIMIT` (20)
steps of: render the conversation with this project's template and history controls, generate, decode
with `parse_completion`, execute the calls, append the results as tool messages. A step without calls
ends the turn. More steps than the limit force-terminate the entry (BFCL fails it). What is BFCL's is
here: the turns (`_Questions`: a miss_func turn adds its held-out functions to the tools and tells the
user so with BFCL's own message), the executor (`BfclExecutor`) and the verdict: the call strings every
step ran go to `bfcl_eval`'s `multi_turn_checker`, which replays them and compares state and responses.

BFCL executes call strings with `eval`. Before any call reaches it, the string we build is parsed with
`ast.parse` and must be exactly one call of a function the entry offers, with keyword arguments whose
values `ast.literal_eval` accepts; anything else is answered with an error and never executed.
Executed instances live in module globals of `multi_turn_utils` keyed by model name and entry id, so
each evaluation gets a fresh model name and its instances are deleted once an entry is checked.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

from tooltune.environments import ToolResult
from tooltune.environments.bfcl import bfcl_environment
from tooltune.environments.limits import STEP_SECONDS, StepTimeout, step_budget
from tooltune.evaluation.bfcl.data import BfclEntry, entry_tools
from tooltune.evaluation.bfcl.official import call_string, check_decoded, fresh_model_name, score_multi_turn
from tooltune.evaluation.bfcl.truth import parse_call_string
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import (
    END,
    Backend,
    Dialogue,
    EpisodeConfig,
    EpisodeRun,
    GenerationRequest,
    MessageContext,
    NamedResult,
    Reply,
    Step,
    StopRules,
    drive,
    step_decoder,
)
from tooltune.prompts import grammar_for, render_answer
from tooltune.schema import Scoring, ToolCall, ToolSpec

logger = logging.getLogger(__name__)

MultiTurnConfig = EpisodeConfig
"""BFCL multi-turn runs under the episode driver's config (template, mode, history, sampling)."""


safe_call_string = call_string
"""The call string BFCL will execute, or (None, reason) when it is not a plain literal call
(`official.call_string`: one rule for the live loop and the scoring of recorded results)."""


def _category(e: BfclEntry) -> str:
    return e.id.rsplit("_", 1)[0]


class BfclExecutor:
    """BFCL's executor behind the driver's `step`: a call runs, as the string `safe_call_string`
    builds, through `execute_multi_turn_func_call` on the entry's instances (a `NamedResult` named by
    that string); a refused call gets an error message and runs nothing. `functions` are the function
    documents offered so far."""

    def __init__(self, e: BfclEntry, model_name: str) -> None:
        self.e, self.model_name = e, model_name
        self.budget = STEP_SECONDS
        """Seconds one call may take (over it: a failed step)."""
        self.functions = list(e.entry["function"])
        # Methods of the entry's API classes, held-out ones included: BFCL executes those whether or not
        # they were offered yet (one ground truth does); everything else (builtins) is refused.
        self.allowed = {f["name"] for f in _all_functions(e.entry)}

    @property
    def tools(self) -> list[ToolSpec]:
        return entry_tools(self.functions)

    def step(self, call: ToolCall) -> ToolResult:
        # deferred: bfcl-eval loads every model handler at import (seconds)
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

        text, why = safe_call_string(call, self.allowed)
        if text is None:
            return ToolResult(f"Error during execution: call rejected: {why}", error=True)
        entry = self.e.entry
        try:
            with step_budget(self.budget, call.name):
                results, _ = execute_multi_turn_func_call(
                    [text], entry["initial_config"], entry["involved_classes"], self.model_name, self.e.id,
                    long_context="long_context" in _category(self.e))
        except StepTimeout as exc:  # a failed step, as BFCL reports a call that raised
            return NamedResult(f"Error during execution: {exc}", error=True, name=text)
        out = str(results[0])
        return NamedResult(out, error=out.startswith("Error during execution"), name=text)


class _Questions(Dialogue):
    """BFCL's user turns: the entry's questions in order; a miss_func turn adds its held-out functions
    to the executor's tools and its user message is BFCL's notice of them."""

    def __init__(self, e: BfclEntry, executor: BfclExecutor, added_msg: str) -> None:
        self.e, self.executor, self.added_msg = e, executor, added_msg
        self.holdout = e.entry.get("missed_function") or {}

    def _turn(self, turn: int) -> Reply:
        questions = self.e.entry["question"]
        if turn >= len(questions):
            return END
        msgs = list(questions[turn])
        if str(turn) in self.holdout:
            self.executor.functions.extend(self.holdout[str(turn)])
            msgs = [{"role": "user", "content": self.added_msg}]
        return Reply.turn(msgs)

    def opening(self, run: EpisodeRun) -> Reply:
        return self._turn(0)

    def after_answer(self, run: EpisodeRun, step: Step) -> Reply:
        return self._turn(run.turn + 1)


class MultiTurnRun(EpisodeRun):
    """One entry's conversation on the episode driver; `request()` / `feed(text)` until `done`."""

    def __init__(self, e: BfclEntry, cfg: MultiTurnConfig, model_name: str) -> None:
        # deferred: bfcl-eval loads every model handler at import (seconds)
        from bfcl_eval.constants.default_prompts import (
            DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
            MAXIMUM_STEP_LIMIT,
        )

        self.e, self.cfg, self.model_name, self.step_limit = e, cfg, model_name, MAXIMUM_STEP_LIMIT
        self.category = _category(e)
        self.executor = BfclExecutor(e, model_name)
        self.context = MessageContext(cfg, e.id, "bfcl", strip_empty_answers=True)
        self.functions, self.history = self.executor.functions, self.context.history
        # the step after the 20th of a turn may still run its calls; then the entry is force-terminated
        rules = StopRules(step_limit=MAXIMUM_STEP_LIMIT + 1)
        super().__init__(self.executor, self.context,
                         _Questions(e, self.executor, DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC),
                         rules, step_decoder(grammar_for(cfg.template), cfg.mode), e.id)

    @property
    def raw(self) -> list[list[str]]:
        """The raw text of every step, per turn (BFCL's result layout)."""
        return self.record.turn_texts

    @property
    def decoded(self) -> list[list[list[str]]]:
        """Per turn, the call strings each step ran (steps where none ran left out): what the checker
        replays."""
        ran = [[[r.name for r in s.results if isinstance(r, NamedResult)] for s in turn]
               for turn in self.record.turn_steps]
        return [[names for names in turn if names] for turn in ran]

    @property
    def error(self) -> str | None:
        if self.record.end == "turn_limit":
            return f"multi_turn:force_terminated: more than {self.step_limit} steps in turn {self.turn}"
        return None

    def verdict(self) -> Verdict:
        """What the loop ran, judged by `multi_turn_checker` (the ``corrected`` rules)."""
        if self.error:
            return Verdict(self.e.id, self.e.category, False, self.error)
        return check_decoded(self.e, self.decoded, self.model_name, forget=False)


def forget_entry(model_name: str, entry_id: str) -> None:
    """Delete the instances BFCL's executor cached for one entry under `model_name`."""

    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    prefix = re.sub(r"[-./:]", "_", model_name)
    tag = re.sub(r"[-./:]", "_", f"_{entry_id}_")
    for key in [k for k in vars(multi_turn_utils) if k.startswith(prefix) and tag in k]:
        delattr(multi_turn_utils, key)


def run_multi_turn(
    entries: Iterable[BfclEntry],
    backend: Backend,
    cfg: MultiTurnConfig,
    on_verdict: Callable[[Verdict, list[list[str]]], None],
    parallel: int = 16,
    progress: Any = None,
    scoring: Scoring = Scoring.OFFICIAL,
) -> None:
    """Run the loop for `entries`, `parallel` conversations at a time (one batched generate per step).

    `scoring`: ``official`` (the default) judges the recorded result (every step's raw text) as
    bfcl-eval's evaluation of a result file does (`official.score_multi_turn`); ``corrected``
    judges what the loop ran (`MultiTurnRun.verdict`)."""
    bfcl_environment()
    model_name = fresh_model_name()

    def finished(run: MultiTurnRun) -> None:
        if scoring == Scoring.OFFICIAL:
            verdict = score_multi_turn(run.e, run.raw, cfg.template, cfg.mode, scoring=Scoring.OFFICIAL)
        else:
            verdict = run.verdict()
        on_verdict(verdict, run.raw)
        forget_entry(model_name, run.e.id)
        if progress is not None:
            progress.update(1)

    drive((MultiTurnRun(e, cfg, model_name) for e in entries), backend, finished, parallel=parallel)


def _all_functions(entry: dict[str, Any]) -> list[dict[str, Any]]:
    held_out = (entry.get("missed_function") or {}).values()
    return list(entry["function"]) + [d for docs in held_out for d in docs]


def scripted_policy(
    entries: Iterable[BfclEntry], template: str = "tool_n1"
) -> Callable[[GenerationRequest], str]:
    """A perfect multi-turn player: each turn's ground-truth calls in its first step, then no call."""

    plans: dict[str, list[list[ToolCall]]] = {}
    for e in entries:
        docs = _all_functions(e.entry)
        plans[e.id] = [[parse_call_string(s, docs) for s in turn] for turn in e.ground_truth]

    def play(r: GenerationRequest) -> str:
        turn, step = r.meta.get("turn", 0), r.meta.get("step", 0)
        calls = plans[r.id][turn] if step == 0 and turn < len(plans[r.id]) else []
        return render_answer(calls, template)

    return play
