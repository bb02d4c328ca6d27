"""Agent categories (agent_multi_step, agent_multi_turn): a sandboxed conversation, judged on the state.

Loop (ACEBench `model_inference/apimodel_inference.py: multi_step_inference / multi_turn_inference`):
at most `max_dialog_turns` (40) messages. multi_step: the model acts alone on the question; every
reply goes to the executor (a reply without a decodable call gets "Please do not ask me any
questions, use the known conditions to solve the problem"). multi_turn: a user simulator (any
Backend) plays the user from the entry's instruction; replies with calls go to the executor,
others to the simulator. A message containing "finish conversation" (after the second) ends it.
Scoring (`eval_main.py: agent_eval, agent_eval_process`, `model_eval/checker.py: agent_checker`):
end-to-end correct iff the state has as many classes as the ground truth and, for every ground
truth class present in the state, every saved attribute equals the expected one (dict attributes:
every expected key equal; extra keys allowed). A ground-truth class absent from the state (a
misspelt name such as "ReminderAPI") is not checked, as in ACEBench. Process accuracy: 1 for an
end-to-end correct entry, else the share of milestones found in order in the executed steps (the
best alternative when there are several milestone lists).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooltune.data.sources.base import describe
from tooltune.data.sources.reading import iter_file
from tooltune.environments.acebench_apis.sandbox import FoodPlatform, MessageApi, Sandbox, end_to_end
from tooltune.evaluation.bfcl import entry_tools
from tooltune.evaluation.bfcl_multiturn import MultiTurnConfig
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import Backend, GenerationRequest, MissingPrediction
from tooltune.parsing import parse_completion, parse_python_calls
from tooltune.prompts import get_template, grammar_for, prompt_tools, render_answer, render_prompt
from tooltune.prompts.templates import python_calls
from tooltune.schema import Sample, SchemaError, ToolCall, ToolSpec

USER_SIM_SKIP_MESSAGE = ("ACEBench agent_multi_turn needs a user simulator (a backend playing the user, "
                         "e.g. an OpenAI-compatible endpoint); skipped (not run without one)")

AGENT_CATEGORIES = ("agent_multi_step", "agent_multi_turn")
FINISH = "finish conversation"
NO_CALL_REPLY = "Please do not ask me any questions, use the known conditions to solve the problem"
_INNER_APOSTROPHE = re.compile(r"(?<=[A-Za-z])'(?=[A-Za-z])")
USER_OPENING = "Is there anything you need help with today?"
AGENT_SYSTEM = """
You act for the user through the functions above. Work step by step: call one function at a time and decide the next step from the execution results. Names the user mentions are full names.
Phone accounts (food platform login): Eve/password123, Frank/password456, Grace/password789, Helen/password321, Isaac/password654, Jack/password654. The current time is 2024-06-11 16:00 (travel: 2024-07-15 08:00).
When the task is complete, answer exactly "finish conversation"."""  # noqa: E501
USER_SYSTEM = """You are a user talking to an assistant agent.

Instruction: {instruction}

Rules:
- Write one line per message, as the user would.
- Reveal the instruction step by step: only what the current step needs, but all of it (e.g. title, description and time of a reminder).
- Never invent information the instruction does not give; say you do not know it.
- Answer the agent's questions as the instruction says (e.g. which message to delete); do not offer help.
- When asked whether you need anything else, check that every task of the instruction is done; if not, ask for the next one.
- When every task is done, reply with the single line 'finish conversation'."""  # noqa: E501


@dataclass
class AgentEntry:
    id: str
    category: str
    question: str
    functions: list[dict[str, Any]]
    initial_config: dict[str, Any]
    involved: list[str]
    ground_truth: list[dict[str, Any]]
    milestones: list[Any]

    @property
    def tools(self) -> list[ToolSpec]:

        return entry_tools(self.functions)


def load_agent_entries(data_dir: str | os.PathLike, categories: Iterable[str]) -> list[AgentEntry]:
    """Agent entries with their ground truth; a malformed line raises SchemaError naming it."""
    out = []
    for cat in [c for c in categories if c in AGENT_CATEGORIES]:
        path = Path(data_dir) / f"data_{cat}.json"
        apath = Path(data_dir) / "possible_answer" / f"data_{cat}.json"
        answers = {}
        for where, rec in _json_lines(apath):
            answers[str(rec.get("id"))] = (where, rec)
        for where, rec in _json_lines(path):
            try:
                ans = answers[str(rec["id"])][1]
                entry = AgentEntry(str(rec["id"]), cat, rec["question"], rec["function"],
                                   rec.get("initial_config") or {}, rec["involved_classes"],
                                   ans["ground_truth"], ans["mile_stone"])
            except KeyError as e:
                raise SchemaError(f"{where}: missing field {e.args[0]!r} (or its possible answer)") from None
            if not isinstance(entry.ground_truth, list) or not isinstance(entry.milestones, list):
                raise SchemaError(f"{where}: ground_truth and mile_stone must be lists")
            out.append(entry)
    return out


def _json_lines(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:

    for rec in iter_file(str(path), ("id",)):
        if not isinstance(rec.data, dict):
            raise SchemaError(f"{describe(rec.position)}: expected an object")
        yield describe(rec.position), rec.data


def milestone_text(text: str) -> str:
    """A milestone or step in the canonical `[f(a='x')]` form (apostrophes inside words repaired)."""
    calls = parse_python_calls(text) or parse_python_calls(_INNER_APOSTROPHE.sub(r"\\'", text))
    return python_calls(calls) if calls else text.strip()


def process_accuracy(steps: list[str], milestones: list[Any]) -> float:
    """Share of milestones met in order by the executed steps (best alternative list)."""
    alternatives = milestones if milestones and isinstance(milestones[0], list) else [milestones]
    best = 0.0
    for alt in alternatives:
        if not alt:
            return 1.0
        pos, hit = 0, 0
        for stone in (milestone_text(s) for s in alt):
            while pos < len(steps):
                pos += 1
                if steps[pos - 1] == stone:
                    hit += 1
                    break
        best = max(best, hit / len(alt))
    return best


@dataclass
class AgentVerdict(Verdict):
    process: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "process": self.process}


@dataclass
class AgentConfig(MultiTurnConfig):
    """The multi-turn controls plus the user simulator's sampling and ACEBench's message limit."""

    user_temperature: float = field(default=0.0, metadata={"help": "user simulator temperature"})
    user_max_new_tokens: int = field(default=256, metadata={"help": "user simulator reply length"})
    max_dialog_turns: int = field(default=40, metadata={"help": "messages per conversation (ACEBench: 40)"})


class AgentRun:
    """One agent conversation: `wants()` says who speaks next ("agent", "user" or None when done)."""

    def __init__(self, e: AgentEntry, cfg: AgentConfig) -> None:
        self.e, self.cfg = e, cfg
        self.multi_turn = e.category == "agent_multi_turn"
        variant = "multi_turn" if self.multi_turn else "multi_step"
        self.sandbox = Sandbox(e.initial_config, e.involved, variant)
        self.history: list[dict[str, Any]] = []
        self.user_msgs = [{"role": "system", "content": USER_SYSTEM.format(instruction=e.question)},
                          {"role": "user", "content": USER_OPENING}]
        self.steps: list[str] = []  # executed steps, canonical `[f(a=1)]` text (for process accuracy)
        self.raw: list[list[str]] = [[]]
        self.index, self.step, self.done = 0, 0, False
        self.next = "user" if self.multi_turn else "agent"
        if not self.multi_turn:
            self.history.append({"role": "user", "content": e.question})

    def wants(self) -> str | None:
        return None if self.done else self.next

    def _count(self, text: str) -> None:
        """One more dialogue message; ACEBench stops on "finish conversation" after the second."""
        if self.index > 1 and FINISH in text:
            self.done = True
        self.index += 1
        if self.index >= self.cfg.max_dialog_turns:
            self.done = True

    def agent_request(self) -> GenerationRequest:
        c = self.cfg
        sample = Sample(self.e.id, "acebench", "multi_step", self.history, self.e.tools, [])
        base = c.system_prompt if c.system_prompt is not None else get_template(c.template).system
        messages = render_prompt(sample, c.template, history=c.history, keep_reasoning=c.keep_reasoning,
                                 system_prompt=base + AGENT_SYSTEM)
        return GenerationRequest(messages, temperature=c.temperature, max_new_tokens=c.max_new_tokens,
                                 seed=c.seed, id=self.e.id,
                                 meta={"turn": len(self.raw) - 1, "step": self.step},
                                 tools=prompt_tools(sample, c.template))

    def user_request(self) -> GenerationRequest:
        return GenerationRequest(list(self.user_msgs), temperature=self.cfg.user_temperature,
                                 max_new_tokens=self.cfg.user_max_new_tokens, seed=self.cfg.seed,
                                 id=self.e.id,
                                 meta={"role": "user", "turn": len(self.raw) - 1})

    def feed_user(self, text: str) -> None:
        text = text if isinstance(text, str) else ""
        opening = not self.history
        self.user_msgs.append({"role": "assistant", "content": text})
        self.history.append({"role": "user", "content": text})
        if not opening:  # the simulator's opening line comes before ACEBench's counted loop
            self._count(text)
            self.raw.append([])
        self.next, self.step = "agent", 0

    def feed_agent(self, text: str) -> None:
        text = text if isinstance(text, str) else ""
        self.raw[-1].append(text)
        self.step += 1
        parsed = parse_completion(text, grammar_for(self.cfg.template), self.cfg.mode)
        self._count(text)
        if not parsed.calls:
            self.history.append({"role": "assistant", "content": text})
            if self.multi_turn:
                self.user_msgs.append({"role": "user", "content": text})
                self.next = "user"
            elif not self.done:
                self.steps.append(text.strip())
                self.history.append({"role": "user", "content": NO_CALL_REPLY})
                self._count(NO_CALL_REPLY)
            return
        self.history.append({"role": "assistant", "content": text, "reasoning": parsed.reasoning,
                             "tool_calls": [c.to_dict() for c in parsed.calls]})
        if self.done:  # "finish conversation" next to calls: ACEBench stops before executing them
            return
        self.steps.append(python_calls(parsed.calls))
        results = [self.sandbox.execute(c) for c in parsed.calls]
        for call, out in zip(parsed.calls, results):
            self.history.append({"role": "tool", "name": call.name, "content": out})
        # ACEBench's finish test on an execution message is list membership, not a substring
        self._count(FINISH if FINISH in results else "")

    def verdict(self) -> AgentVerdict:
        why = end_to_end(self.sandbox.state(), self.e.ground_truth)
        process = 1.0 if why is None else process_accuracy(self.steps, self.e.milestones)
        return AgentVerdict(self.e.id, self.e.category, why is None, why, round(process, 4))


def run_agent(
    entries: Iterable[AgentEntry],
    backend: Backend,
    cfg: AgentConfig,
    on_verdict: Callable[[Verdict, Any], None],
    user_backend: Backend | None = None,
    parallel: int = 16,
) -> list[str]:
    """Run agent conversations, `parallel` at a time (batched generate per round); returns skip notes.

    agent_multi_turn entries need `user_backend` (the user simulator); without one they are skipped
    and the returned list says so. Each verdict goes to `on_verdict(verdict, raw completions)`.
    """
    pending = list(entries)
    skipped = []
    if user_backend is None and any(e.category == "agent_multi_turn" for e in pending):
        pending = [e for e in pending if e.category != "agent_multi_turn"]
        skipped.append(f"agent_multi_turn: {USER_SIM_SKIP_MESSAGE}")
    active: list[AgentRun] = []
    while pending or active:
        while pending and len(active) < parallel:
            active.append(AgentRun(pending.pop(0), cfg))
        agents = [r for r in active if r.wants() == "agent"]
        users = [r for r in active if r.wants() == "user"]
        if agents:
            for r, texts in zip(agents, backend.generate([r.agent_request() for r in agents])):
                r.feed_agent(texts[0] if texts else "")
        if users and user_backend is not None:
            for r, texts in zip(users, user_backend.generate([r.user_request() for r in users])):
                r.feed_user(texts[0] if texts else "")
        for r in [r for r in active if r.done]:
            on_verdict(r.verdict(), r.raw)
            active.remove(r)
    return skipped


def agent_plan(e: AgentEntry) -> list[list[ToolCall]]:
    """The calls a perfect agent makes: one step per milestone (first alternative list), repaired
    where the milestones contradict the entry's own ground-truth state (see `_repair_plan`)."""
    stones = e.milestones[0] if e.milestones and isinstance(e.milestones[0], list) else e.milestones
    plan = []
    for s in stones:
        calls = parse_python_calls(milestone_text(s))
        if calls is None:
            raise SchemaError(f"{e.id}: milestone {s!r:.80} is not a call list")
        plan.append(calls)
    return _repair_plan(e, plan)


def _repair_plan(e: AgentEntry, plan: list[list[ToolCall]]) -> list[list[ToolCall]]:
    """Ground truth wins over milestones. In the current data some milestones omit a needed
    login_device / turn_on_wifi / login_food_platform step, shorten a product name ("Super Supreme"
    for "Super Supreme Pizza") or delete another message than the one the ground truth lacks."""
    gt = {k: v for d in e.ground_truth for k, v in d.items()}
    names = {c.name for step in plan for c in step}
    base, want = e.initial_config.get("BaseApi", {}), gt.get("BaseApi", {})
    menu = {p["product"] for m in FoodPlatform().merchant_list.values() for p in m["menu"]}
    gone = sorted(set(MessageApi().inbox) - {int(k) for k in gt.get("MessageApi", {}).get("inbox", {"0": 0})})
    out: list[list[ToolCall]] = []
    for step in plan:
        fixed = []
        for c in step:
            args = dict(c.arguments)
            if c.name == "add_food_delivery_order" and isinstance(args.get("items"), list):
                args["items"] = [{**i, "product": _menu_name(menu, i.get("product"))} if isinstance(i, dict)
                                 else i for i in args["items"]]
                user = args.get("username")
                logged = gt.get("FoodPlatform", {}).get("logged_in_users", [])
                if user in logged and "login_food_platform" not in names:
                    pw = FoodPlatform().users.get(user, {}).get("password")
                    out.append([ToolCall("login_food_platform", {"username": user, "password": pw})])
                    names.add("login_food_platform")
            if c.name == "delete_message" and len(gone) == 1:
                args["message_id"] = gone[0]
            fixed.append(ToolCall(c.name, args))
        out.append(fixed)
    for flag, fn in (("logged_in", "login_device"), ("wifi", "turn_on_wifi")):
        if want.get(flag) and not base.get(flag, flag == "logged_in") and fn not in names:
            out.insert(0, [ToolCall(fn, {})])
    return out


def _menu_name(menu: set[str], name: Any) -> Any:
    return next((p for p in sorted(menu) if isinstance(name, str) and p.startswith(name)), name)


def agent_scripted_policy(entries: Iterable[AgentEntry], template: str = "tool_n1"
                          ) -> Callable[[GenerationRequest], str]:
    """Ground-truth agent: milestone k at step k of the first turn, then "finish conversation"."""
    plans = {e.id: agent_plan(e) for e in entries}

    def play(r: GenerationRequest) -> str:
        plan, step = plans.get(r.id or ""), r.meta.get("step", 0)
        if plan is None:
            raise MissingPrediction(f"no agent plan for id {r.id!r}")
        if r.meta.get("turn", 0) == 0 and step < len(plan):
            return render_answer(plan[step], template)
        return FINISH

    return play


def scripted_user_policy(entries: Iterable[AgentEntry]) -> Callable[[GenerationRequest], str]:
    """A user who states the whole instruction first, then says "finish conversation"."""
    questions = {e.id: e.question for e in entries}
    return lambda r: questions[r.id or ""] if r.meta.get("turn", 0) == 0 else FINISH
