"""BFCL multi-turn: the inference loop (model -> decode -> BFCL's executor -> results back) and its check.

Per turn: held-out functions of that turn (miss_func) join the tool list and the user is told so with
BFCL's own message; then at most `MAXIMUM_STEP_LIMIT` (20) steps of: render the conversation with this
project's template and history controls, generate, decode with `parse_completion`, execute the calls
on BFCL's API classes, append the results as tool messages. A step without calls ends the turn. More
steps than the limit force-terminate the entry (BFCL fails it). The decoded calls of every step go to
`bfcl_eval`'s `multi_turn_checker`, which replays them and compares state and responses.

BFCL executes call strings with `eval`. Before any call reaches it, the string we build is parsed with
`ast.parse` and must be exactly one call of a function the entry offers, with keyword arguments whose
values `ast.literal_eval` accepts; anything else is answered with an error and never executed.
Executed instances live in module globals of `multi_turn_utils` keyed by model name and entry id, so
each evaluation gets a fresh model name and its instances are deleted once an entry is checked.
"""

from __future__ import annotations

import ast
import keyword
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tooltune.evaluation.bfcl import BfclEntry, bfcl_environment, entry_tools
from tooltune.evaluation.bfcl_truth import parse_call_string
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import Backend, GenerationRequest
from tooltune.parsing import parse_completion
from tooltune.prompts import grammar_for, prompt_tools, python_literal, render_answer, render_prompt
from tooltune.schema import Sample, ToolCall

logger = logging.getLogger(__name__)


@dataclass
class MultiTurnConfig:
    template: str = "tool_n1"
    mode: str = "strict"
    history: str = "native"
    keep_reasoning: bool = True
    system_prompt: str | None = None
    temperature: float = 0.0
    max_new_tokens: int = 512
    seed: int | None = None


def safe_call_string(call: ToolCall, allowed: set[str]) -> tuple[str | None, str | None]:
    """The call string BFCL will execute, or (None, reason) when it is not a plain literal call."""
    if call.name not in allowed:
        return None, f"function {call.name!r} does not exist"
    if not call.name.isidentifier() or keyword.iskeyword(call.name):
        return None, f"function name {call.name!r} is not an identifier"
    for k in call.arguments:
        if not isinstance(k, str) or not k.isidentifier() or keyword.iskeyword(k):
            return None, f"argument name {k!r} is not an identifier"
    text = f"{call.name}(" + ", ".join(f"{k}={python_literal(v)}" for k, v in call.arguments.items()) + ")"
    try:
        node = ast.parse(text, mode="eval").body
        ok = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == call.name
              and not node.args and len(node.keywords) == len(call.arguments))
        if ok:
            for kw in node.keywords:
                ast.literal_eval(kw.value)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as e:
        return None, f"arguments are not plain literals ({type(e).__name__})"
    return (text, None) if ok else (None, "not a single plain call")


class MultiTurnRun:
    """The state of one entry's conversation; `request()` / `feed(text)` until `done`."""

    def __init__(self, e: BfclEntry, cfg: MultiTurnConfig, model_name: str) -> None:
        # deferred: bfcl-eval loads every model handler at import (seconds)
        from bfcl_eval.constants.default_prompts import (
            DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
            MAXIMUM_STEP_LIMIT,
        )

        self.e, self.cfg, self.model_name = e, cfg, model_name
        self.functions = list(e.entry["function"])
        self.holdout = e.entry.get("missed_function") or {}
        # Methods of the entry's API classes, held-out ones included: BFCL executes those whether or not
        # they were offered yet (one ground truth does); everything else (builtins) is refused.
        self.allowed = {f["name"] for f in _all_functions(e.entry)}
        self.added_msg, self.step_limit = DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC, MAXIMUM_STEP_LIMIT
        self.history: list[dict[str, Any]] = []
        self.decoded: list[list[list[str]]] = []
        self.raw: list[list[str]] = []
        self.turn, self.step, self.done, self.error = -1, 0, False, None
        self._next_turn()

    @property
    def category(self) -> str:
        return self.e.id.rsplit("_", 1)[0]

    def _next_turn(self) -> None:
        self.turn += 1
        questions = self.e.entry["question"]
        if self.turn >= len(questions):
            self.done = True
            return
        msgs = list(questions[self.turn])
        if str(self.turn) in self.holdout:
            self.functions.extend(self.holdout[str(self.turn)])
            msgs = [{"role": "user", "content": self.added_msg}]
        self.history.extend(msgs)
        self.decoded.append([])
        self.raw.append([])
        self.step = 0

    def request(self) -> GenerationRequest:
        sample = Sample(self.e.id, "bfcl", "multi_step", self.history, entry_tools(self.functions), [])
        c = self.cfg
        messages = render_prompt(sample, c.template, history=c.history, keep_reasoning=c.keep_reasoning,
                                 system_prompt=c.system_prompt)
        return GenerationRequest(messages, temperature=c.temperature, max_new_tokens=c.max_new_tokens,
                                 seed=c.seed, id=self.e.id, meta={"turn": self.turn, "step": self.step},
                                 tools=prompt_tools(sample, c.template))

    def feed(self, text: str) -> None:
        # deferred: bfcl-eval loads every model handler at import (seconds)
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

        self.raw[self.turn].append(text)
        parsed = parse_completion(text, grammar_for(self.cfg.template), self.cfg.mode)
        if not parsed.calls:  # no call (or undecodable): the turn is over; the reply stays in the history
            if parsed.calls == [] and not self.cfg.keep_reasoning:  # an explicit no-call: drop its reasoning
                text = render_answer([], self.cfg.template, include_reasoning=False)
            self.history.append({"role": "assistant", "content": text})
            self._next_turn()
            return
        checked = [safe_call_string(c, self.allowed) for c in parsed.calls]
        safe = [s for s, _ in checked if s is not None]
        entry = self.e.entry
        results = iter(execute_multi_turn_func_call(
            safe, entry["initial_config"], entry["involved_classes"], self.model_name, self.e.id,
            long_context="long_context" in self.category)[0] if safe else [])
        if safe:
            self.decoded[self.turn].append(safe)
        self.history.append({"role": "assistant", "content": text, "reasoning": parsed.reasoning,
                             "tool_calls": [c.to_dict() for c in parsed.calls]})
        for (s, why), call in zip(checked, parsed.calls):
            out = next(results) if s is not None else f"Error during execution: call rejected: {why}"
            self.history.append({"role": "tool", "name": s or call.name, "content": str(out)})
        self.step += 1
        if self.step > self.step_limit:
            self.done = True
            self.error = f"multi_turn:force_terminated: more than {self.step_limit} steps in turn {self.turn}"

    def verdict(self) -> Verdict:
        # deferred: bfcl-eval loads every model handler at import (seconds)
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

        if self.error:
            return Verdict(self.e.id, self.e.category, False, self.error)
        try:
            result = multi_turn_checker(self.decoded, self.e.ground_truth, self.e.entry, self.category,
                                        self.model_name)
        except Exception as exc:  # e.g. the checker's own assertions on instance sets
            return Verdict(self.e.id, self.e.category, False, f"checker_error: {type(exc).__name__}: {exc}")
        if result.get("valid"):
            return Verdict(self.e.id, self.e.category, True)
        return Verdict(self.e.id, self.e.category, False,
                       f"{result.get('error_type')}: {result.get('error_message')}")


def _forget_instances(model_name: str, entry_id: str) -> None:

    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    prefix = re.sub(r"[-./:]", "_", model_name)
    tag = re.sub(r"[-./:]", "_", f"_{entry_id}_")
    for key in [k for k in vars(multi_turn_utils) if k.startswith(prefix) and tag in k]:
        delattr(multi_turn_utils, key)


def fresh_model_name() -> str:
    """A model name no earlier evaluation in this process used (BFCL caches instances by name)."""
    return f"tooltune_{uuid.uuid4().hex[:12]}"


def run_multi_turn(
    entries: Iterable[BfclEntry],
    backend: Backend,
    cfg: MultiTurnConfig,
    on_verdict: Callable[[Verdict, list[list[str]]], None],
    parallel: int = 16,
    progress: Any = None,
) -> None:
    """Run the loop for `entries`, `parallel` conversations at a time (one batched generate per step)."""
    bfcl_environment()
    model_name = fresh_model_name()
    pending = list(entries)
    active: list[MultiTurnRun] = []
    while pending or active:
        while pending and len(active) < parallel:
            active.append(MultiTurnRun(pending.pop(0), cfg, model_name))
        running = [r for r in active if not r.done]
        if running:
            outs = backend.generate([r.request() for r in running])
            for r, texts in zip(running, outs):
                r.feed(texts[0] if texts else "")
        for r in [r for r in active if r.done]:
            on_verdict(r.verdict(), r.raw)
            _forget_instances(model_name, r.e.id)
            active.remove(r)
            if progress is not None:
                progress.update(1)


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
