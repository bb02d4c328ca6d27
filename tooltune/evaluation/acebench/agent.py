"""Agent categories (agent_multi_step, agent_multi_turn): a sandboxed conversation, judged on the state.

Loop (ACEBench `model_inference/apimodel_inference.py: multi_step_inference / multi_turn_inference`),
run by the episode driver (`tooltune.generation.episodes`; what is ACEBench's is here: the user side,
the sandbox executor, the stop rules, milestones and the verdict):
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

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from tooltune.environments import ToolResult
from tooltune.environments.acebench_apis.sandbox import FoodPlatform, MessageApi, Sandbox, end_to_end
from tooltune.environments.limits import STEP_SECONDS, StepTimeout, step_budget
from tooltune.evaluation.acebench.data import AgentEntry
from tooltune.evaluation.acebench.official_decode import parse_agent_step
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import (
    ASK,
    Backend,
    EpisodeConfig,
    EpisodeRun,
    GenerationRequest,
    MessageContext,
    MissingPrediction,
    Reply,
    SimulatedUser,
    Step,
    StopRules,
    drive,
)
from tooltune.parsing import parse_python_calls
from tooltune.prompts import get_template, grammar_for, render_answer
from tooltune.prompts.templates import python_calls
from tooltune.schema import Parsed, SchemaError, Scoring, ToolCall, ToolSpec

USER_SIM_SKIP_MESSAGE = ("ACEBench agent_multi_turn needs a user simulator (a backend playing the user, "
                         "e.g. an OpenAI-compatible endpoint); skipped (not run without one)")

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
class AgentConfig(EpisodeConfig):
    """The episode controls plus the user simulator's sampling and ACEBench's message limit."""

    user_temperature: float = field(default=0.0, metadata={"help": "user simulator temperature"})
    user_max_new_tokens: int = field(default=256, metadata={"help": "user simulator reply length"})
    max_dialog_turns: int = field(default=40, metadata={"help": "messages per conversation (ACEBench: 40)"})
    scoring: Scoring = field(default=Scoring.OFFICIAL,
                             metadata={"help": "scoring mode: official or corrected"})


class SandboxExecutor:
    """The entry's sandbox as the episode's executor: ACEBench runs the calls as the model wrote them."""

    def __init__(self, e: AgentEntry, variant: str) -> None:
        self.e, self.sandbox = e, Sandbox(e.initial_config, e.involved, variant)

    @property
    def tools(self) -> list[ToolSpec]:
        return self.e.tools

    def step(self, call: ToolCall) -> ToolResult:
        try:
            with step_budget(STEP_SECONDS, call.name):
                out = self.sandbox.execute(call)
        except StepTimeout as e:  # a failed call, as ACEBench reports a call that raised
            out = f"Error during execution: {e}"
        return ToolResult(out, error=out.startswith("Error during execution"))


class _User(SimulatedUser):
    """ACEBench's user side. multi_step: the question, then `NO_CALL_REPLY` after every reply without
    calls. multi_turn: the user simulator (`msgs`, its own transcript, where the agent is the user),
    first and after every reply without calls."""

    def __init__(self, e: AgentEntry, cfg: AgentConfig, multi_turn: bool) -> None:
        self.e, self.cfg, self.multi_turn = e, cfg, multi_turn
        self.msgs = [{"role": "system", "content": USER_SYSTEM.format(instruction=e.question)},
                     {"role": "user", "content": USER_OPENING}]

    def opening(self, run: EpisodeRun) -> Reply:
        return ASK if self.multi_turn else Reply.turn([{"role": "user", "content": self.e.question}])

    def after_answer(self, run: EpisodeRun, step: Step) -> Reply:
        if not self.multi_turn:
            return Reply.nudge(NO_CALL_REPLY)
        self.msgs.append({"role": "user", "content": step.text})
        return ASK

    def user_request(self, run: EpisodeRun) -> GenerationRequest:
        return GenerationRequest(list(self.msgs), temperature=self.cfg.user_temperature,
                                 max_new_tokens=self.cfg.user_max_new_tokens, seed=self.cfg.seed,
                                 id=self.e.id, meta={"role": "user", "turn": max(0, run.turn)})

    def user_said(self, run: EpisodeRun, text: str) -> Reply:
        self.msgs.append({"role": "assistant", "content": text})
        return Reply.turn([{"role": "user", "content": text}])


class AgentRun(EpisodeRun):
    """One agent conversation on the episode driver (`tooltune.generation.episodes`): ACEBench's
    message limit and "finish conversation" (from the third counted message on; an execution message
    ends it only when a result is exactly the phrase) are its stop rules."""

    def __init__(self, e: AgentEntry, cfg: AgentConfig) -> None:
        self.e, self.cfg = e, cfg
        self.multi_turn = e.category == "agent_multi_turn"
        self.executor = SandboxExecutor(e, "multi_turn" if self.multi_turn else "multi_step")
        self.sandbox = self.executor.sandbox
        base = cfg.system_prompt if cfg.system_prompt is not None else get_template(cfg.template).system
        self.context = MessageContext(replace(cfg, system_prompt=base + AGENT_SYSTEM), e.id, "acebench")
        self.history = self.context.history
        rules = StopRules(finish=(FINISH,), finish_after=2, max_messages=max(1, cfg.max_dialog_turns))
        super().__init__(self.executor, self.context, _User(e, cfg, self.multi_turn), rules, self.decode_step,
                         e.id)

    def decode_step(self, text: str) -> Parsed:
        """A reply's calls: what goes to the executor."""
        return parse_agent_step(text, grammar_for(self.cfg.template), self.cfg.mode, self.multi_turn,
                                self.cfg.scoring)

    agent_request, feed_agent = EpisodeRun.request, EpisodeRun.feed  # the agent's side, by ACEBench's names

    @property
    def raw(self) -> list[list[str]]:
        """The raw text of every step, per turn."""
        return self.record.turn_texts

    @property
    def steps(self) -> list[str]:
        """The executed steps in canonical `[f(a=1)]` text, and a multi_step reply without calls as its
        text (process accuracy)."""
        return [python_calls(s.calls or []) if s.results else s.text.strip()
                for turn in self.record.turn_steps for s in turn if s.results or s.nudged]

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
    drive((AgentRun(e, cfg) for e in pending), backend, lambda r: on_verdict(r.verdict(), r.raw),
          user=user_backend, parallel=parallel)
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
