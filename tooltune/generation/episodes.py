"""The one episode driver: every multi-turn loop (agentic training, BFCL multi-turn, ACEBench agent).

An episode is a sequence of turns; a turn opens with user messages and runs steps: generate, decode the
calls (`Decode`; `step_decoder` reads them with the template's grammar), execute each call on the
episode's executor (an `Environment`, or any object with `tools` and `step(call) -> ToolResult`), send
the results back to the model as tool messages and generate again. `tool_messages` is the one place
that decides how a tool result goes back to the model; both views of the conversation render what it
returns:

- the token view (`tooltune.generation.trajectories`: training rollouts, the greedy episode success
  rate): token ids after a prompt rendered once; a step is the generator's new ids (`Generate`), the
  messages after it are appended as the tokenizer's chat template renders them, with loss mask 0;
- the message view (`tooltune.generation.conversations`: benchmarks): the conversation as messages,
  rendered for each step with `render_prompt` under an `EpisodeConfig` for any `Backend`.

What is not generic lives with the caller as a `Dialogue`: which user messages open each turn, what
follows a step without calls (the next turn, the end, a fixed nudge, or the user simulator's turn).

Stop rules (`StopRules`) and the stop reason each records in `Episode.end`:

- ``answer`` / ``unreadable``: a step without calls (none, or no decodable call block) ended the last
  turn; ``no_turn``: the dialogue had no turn to open;
- ``cut``: the step did not end with EOS (token view; the generator stopped at its length limit);
- ``turn_limit``: a step with calls reached the turn's step limit; its calls ran, then the episode
  is force-terminated (BFCL fails such an entry; training judges the state reached);
- ``token_budget``: the messages after a step would not fit the trajectory budget (token view);
- ``finish``: a counted dialogue message contained a finish phrase (a tool result counts when it is
  exactly one), after `StopRules.finish_after` counted messages; a step that says it next to calls
  ends the episode before they run;
- ``message_limit``: the dialogue reached `StopRules.max_messages` counted messages. Counted are
  model steps, user messages after the first turn's, nudges and each step's tool results (one).

Every episode needs a bound (a step limit, a token budget or a message limit): a model that calls
tools forever must not run forever.

`Episode` records every step of every turn: raw text (`Episode.turn_texts`, the layout replay
backends and predictions files use), decoded calls, tool results, the stop reason, and the token
trajectory in the token view. `drive` runs many episodes, `parallel` at a time, one batched generate per
round (and one for user simulators). The tool calls of a round run side by side across episodes when
their executors allow it (`run_tool_calls`): a round costs about its slowest episode's calls, not the
sum; each episode's own calls keep their order. Judging the episode is the caller's: `env.outcome`
for training tasks (`run_episodes`), the official checkers for the benchmarks.
"""

from __future__ import annotations

import abc
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from tooltune.environments import Outcome, ToolResult
from tooltune.generation.backends import Backend, GenerationRequest
from tooltune.generation.tool_calls import TOOL_THREADS, run_tool_calls
from tooltune.parsing import Grammar, parse_calls, parse_completion
from tooltune.schema import Parsed, ToolCall, ToolSpec

Generate = Callable[[list[list[int]]], tuple[list[list[int]], list[list[float]] | None]]
"""Token ids of several contexts -> (each one's new ids, ending with EOS unless cut; their log-probs
or None)."""

CALLS_ONLY = "calls"
"""Decoding mode that reads only the call block (`parse_calls`, no format requirement): training."""


@dataclass(frozen=True)
class StopRules:
    """Limits of an episode (module docstring); 0 / () switch a rule off."""

    step_limit: int = 0
    max_tokens: int = 0
    finish: tuple[str, ...] = ()
    finish_after: int = 0
    max_messages: int = 0


@dataclass
class Step:
    """One generation: its raw text, decoded calls (None: no decodable call block), the results of the
    calls that ran (empty when none ran), and whether a nudge answered it inside its turn."""

    text: str
    calls: list[ToolCall] | None
    results: list[ToolResult] = field(default_factory=list)
    nudged: bool = False


@dataclass
class Episode:
    """The record of one episode (token fields are filled in the token view only)."""

    turn_steps: list[list[Step]] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    well_formed: int = 0
    calls: int = 0
    tool_errors: int = 0
    tool_seconds: float = 0.0
    end: str = ""
    outcome: Outcome | None = None

    @property
    def turn_texts(self) -> list[list[str]]:
        """The raw text of every step, per turn."""
        return [[s.text for s in turn] for turn in self.turn_steps]

    @property
    def texts(self) -> list[str]:
        """The raw text of every step, in order."""
        return [s.text for turn in self.turn_steps for s in turn]

    @property
    def turns(self) -> int:
        """Model turns: generation steps over the whole episode."""
        return sum(len(turn) for turn in self.turn_steps)

    @property
    def format_share(self) -> float:
        """Share of steps whose decode gave a format verdict of ok (`step_decoder`: the strict format
        under `CALLS_ONLY`)."""
        return self.well_formed / self.turns if self.turns else 0.0


@dataclass(frozen=True)
class NamedResult(ToolResult):
    """A tool result whose message carries another name than its call's (BFCL's executor names a
    result by the call string it ran)."""

    name: str = ""


def tool_messages(calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> list[dict[str, Any]]:
    """The messages that bring a step's tool results back to the model, one per call, in order."""
    return [{"role": "tool", "name": r.name if isinstance(r, NamedResult) and r.name else c.name,
             "content": r.content} for c, r in zip(calls, results, strict=True)]


class Executor(Protocol):
    """What an episode runs calls on: an `Environment`, or a benchmark's own executor. One whose
    ``concurrency`` attribute is ``(key, limit)`` lets `drive` run its calls on a worker thread, side
    by side with other episodes' calls, at most ``limit`` at once per ``key`` (one server); without it
    (or None) its calls run on the caller's thread (an environment whose step budget interrupts pure
    Python code needs the main thread)."""

    @property
    def tools(self) -> list[ToolSpec]: ...

    def step(self, call: ToolCall) -> ToolResult: ...


@dataclass(frozen=True)
class Reply:
    """The dialogue's answer when a turn is over: ``end``, ``turn`` (open one with `messages`),
    ``nudge`` (`messages` go to the model inside the same turn) or ``ask`` (the user simulator speaks)."""

    kind: str
    messages: tuple[dict[str, Any], ...] = ()

    @classmethod
    def turn(cls, messages: Iterable[dict[str, Any]]) -> Reply:
        return cls("turn", tuple(messages))

    @classmethod
    def nudge(cls, text: str) -> Reply:
        return cls("nudge", ({"role": "user", "content": text},))


END, ASK = Reply("end"), Reply("ask")


class Dialogue:
    """The user's side of an episode. This base class is one turn whose user message is already in the
    prompt (training tasks); benchmarks override what they need."""

    def opening(self, run: EpisodeRun) -> Reply:
        return Reply.turn(())

    def after_answer(self, run: EpisodeRun, step: Step) -> Reply:
        """A step without calls ended a turn (not called once the episode has ended)."""
        return END



class SimulatedUser(Dialogue, abc.ABC):
    """A dialogue whose user is played by a backend: it may answer ``ask``, and then says what the user
    simulator is asked (`user_request`) and what its reply becomes (`user_said`: by default the next turn)."""

    @abc.abstractmethod
    def user_request(self, run: EpisodeRun) -> GenerationRequest:
        """The request the user simulator answers."""

    def user_said(self, run: EpisodeRun, text: str) -> Reply:
        return Reply.turn(({"role": "user", "content": text},))


@dataclass
class TokenStep:
    """A step in the token view: the new ids and their log-probs (None when the generator gives none)."""

    ids: list[int]
    logprobs: list[float] | None = None


class Context(Protocol):
    """A view of the conversation (`conversations.MessageContext`, `trajectories.TokenContext`).
    `model_input`: the next step's `GenerationRequest` or token ids; `add_step`: a step's text and
    whether it ended (False: cut); `add_reply`: keep the decoded step; `add_messages`: append messages
    (`first`: the first turn's), False when they do not fit."""

    def model_input(self, run: EpisodeRun) -> Any: ...

    def add_step(self, run: EpisodeRun, out: Any) -> tuple[str, bool]: ...

    def add_reply(self, run: EpisodeRun, text: str, parsed: Parsed) -> None: ...

    def add_messages(self, run: EpisodeRun, messages: list[dict[str, Any]], first: bool) -> bool: ...


Decode = Callable[[str], Parsed]
"""A step's text -> its decoded calls (`Parsed.calls`; None: no decodable call block), reasoning and
format verdict."""


def step_decoder(grammar: str | Grammar, mode: str = "strict") -> Decode:
    """`parse_completion` under `grammar` and format `mode`; with `CALLS_ONLY`, the call block alone
    (`parse_calls`) with the strict format verdict (training reads calls whatever surrounds them and
    reports the format apart)."""
    if mode != CALLS_ONLY:
        return lambda text: parse_completion(text, grammar, mode)

    def decode(text: str) -> Parsed:
        strict = parse_completion(text, grammar, "strict")
        return dataclasses.replace(parse_calls(text, grammar), format_ok=strict.format_ok)

    return decode


class EpisodeRun:
    """One episode in progress: `wants()` says who acts next ("model", "user", or None once it ended);
    `feed` takes a model step, `feed_user` the user simulator's message. `record` is the `Episode`."""

    def __init__(
        self,
        executor: Executor,
        context: Context,
        dialogue: Dialogue | None = None,
        rules: StopRules | None = None,
        decode: Decode | None = None,
        id: str = "",
    ) -> None:
        self.executor, self.context, self.id = executor, context, id
        self.dialogue, self.rules = dialogue or Dialogue(), rules or StopRules()
        if not (self.rules.step_limit or self.rules.max_tokens or self.rules.max_messages):
            raise ValueError("an episode needs a bound: StopRules.step_limit, max_tokens or max_messages")
        self.decode = decode or step_decoder("tool_n1")
        self.record = Episode()
        self.counted = 0  # dialogue messages counted so far (StopRules.max_messages, finish_after)
        self._next: str | None = "model"
        self._follow(self.dialogue.opening(self), "no_turn")

    @property
    def done(self) -> bool:
        return bool(self.record.end)

    @property
    def turn(self) -> int:
        """The current turn (-1 before the first opens)."""
        return len(self.record.turn_steps) - 1

    @property
    def step(self) -> int:
        """Steps so far in the current turn."""
        return len(self.record.turn_steps[-1]) if self.record.turn_steps else 0

    def wants(self) -> str | None:
        return None if self.done else self._next

    def request(self) -> GenerationRequest:
        """The next model step's request (message view)."""
        out = self.context.model_input(self)
        if not isinstance(out, GenerationRequest):
            raise TypeError("request() is for message-view episodes")
        return out

    def user_request(self) -> GenerationRequest:
        if not isinstance(self.dialogue, SimulatedUser):
            raise TypeError(f"episode {self.id!r} asks for the user, but its dialogue "
                            f"({type(self.dialogue).__name__}) is not a SimulatedUser")
        return self.dialogue.user_request(self)

    def _stop(self, why: str) -> None:
        if not self.record.end:
            self.record.end = why

    def _count(self, text: str = "", results: Sequence[ToolResult] = ()) -> None:
        """One more dialogue message: a finish phrase in it (a result equal to one) may end the episode,
        and so may the message budget."""
        r = self.rules
        said = any(p in text for p in r.finish) or any(x.content in r.finish for x in results)
        if said and self.counted >= r.finish_after:
            self._stop("finish")
        self.counted += 1
        if r.max_messages and self.counted >= r.max_messages:
            self._stop("message_limit")

    def _add(self, messages: Sequence[dict[str, Any]], first: bool = False, count: bool = True) -> None:
        if not self.context.add_messages(self, list(messages), first):
            self._stop("token_budget")
        for m in messages if count else ():
            self._count(m.get("content") or "")

    def _follow(self, reply: Reply, end: str) -> None:
        """Act on the dialogue's reply when a turn is over (or at the opening)."""
        if reply.kind == "end":
            self._stop(end)
        elif reply.kind == "ask":
            self._next = "user"
        elif reply.kind == "nudge":
            self.record.turn_steps[-1][-1].nudged = True
            self._next = "model"
            self._add(reply.messages)
        elif reply.kind == "turn":
            first = not self.record.turn_steps
            self.record.turn_steps.append([])
            self._next = "model"
            self._add(reply.messages, first=first, count=not first)
        else:
            raise ValueError(f"unknown dialogue reply {reply.kind!r}")

    def feed_user(self, text: str) -> None:
        """The user simulator's message."""
        self._follow(self.dialogue.user_said(self, text if isinstance(text, str) else ""), "answer")

    def feed(self, out: str | TokenStep) -> None:
        """One model step: record it, stop or execute its calls, send the results back."""
        if self.begin(out):
            self.run_calls()
            self.complete()

    def begin(self, out: str | TokenStep) -> bool:
        """Record one model step; whether it has calls to run (`run_calls`, then `complete`)."""
        rec = self.record
        text, ended = self.context.add_step(self, out)
        parsed = self.decode(text)
        step = Step(text, parsed.calls)
        rec.turn_steps[-1].append(step)
        rec.well_formed += int(parsed.format_ok)
        self._count(text)
        if not ended:
            self._stop("cut")
            return False
        self.context.add_reply(self, text, parsed)
        calls = parsed.calls
        if not calls:
            if not self.done:
                end = "answer" if calls is not None else "unreadable"
                self._follow(self.dialogue.after_answer(self, step), end)
            return False
        return not self.done  # a finish phrase next to calls: nothing runs

    def run_calls(self, gate: threading.Semaphore | None = None) -> None:
        """Execute the current step's calls in order on the executor, each inside `gate` when given (a
        server's limit of calls at once); touches only this episode, so episodes may run it on
        threads of their own."""
        step = self.record.turn_steps[-1][-1]
        t0 = time.perf_counter()
        results = []
        for call in step.calls or []:
            if gate is None:
                results.append(self.executor.step(call))
            else:
                with gate:
                    results.append(self.executor.step(call))
        step.results = results
        self.record.tool_seconds += time.perf_counter() - t0

    def complete(self) -> None:
        """Send the current step's results back and apply the stop rules."""
        rec, step = self.record, self.record.turn_steps[-1][-1]
        calls = step.calls or []
        rec.calls += len(calls)
        rec.tool_errors += sum(r.error for r in step.results)
        self._count(results=step.results)
        if self.rules.step_limit and self.step >= self.rules.step_limit:
            self._stop("turn_limit")
        if not self.done:
            self._add(tool_messages(calls, step.results), count=False)


R = TypeVar("R", bound=EpisodeRun)


def drive(
    runs: Iterable[R],
    model: Backend | Generate,
    on_done: Callable[[R], None] | None = None,
    user: Backend | None = None,
    parallel: int = 0,
    tool_threads: int = TOOL_THREADS,
) -> None:
    """Run `runs` to their end, `parallel` at a time (0: all), taken from the iterable as room frees up.

    Each round: one batched call to `model` for every episode waiting for a model step (a `Backend`
    for message-view episodes, a `Generate` for token-view ones), the calls of those steps
    (`run_tool_calls`, `tool_threads` at once), then one call to `user` for every episode waiting for
    its user simulator; finished episodes go to `on_done` in order."""
    pending = iter(runs)
    active: list[R] = []
    exhausted = False
    while True:
        while not exhausted and (not parallel or len(active) < parallel):
            nxt = next(pending, None)
            if nxt is None:
                exhausted = True
            else:
                active.append(nxt)
        if not active:
            return
        steppers = [r for r in active if r.wants() == "model"]
        speakers = [r for r in active if r.wants() == "user"]
        if steppers:
            calling = [r for r, out in zip(steppers, _generate(model, steppers), strict=True) if r.begin(out)]
            run_tool_calls(calling, tool_threads)
            for r in calling:
                r.complete()
        if speakers:
            if user is None:
                raise ValueError(f"episode {speakers[0].id!r} waits for a user simulator, and none was given")
            for r, texts in zip(speakers, user.generate([r.user_request() for r in speakers]), strict=True):
                r.feed_user(texts[0] if texts else "")
        for r in [r for r in active if r.done]:
            if on_done is not None:
                on_done(r)
            active.remove(r)


def _generate(model: Backend | Generate, runs: list[EpisodeRun]) -> list[str | TokenStep]:
    inputs = [r.context.model_input(r) for r in runs]
    if isinstance(model, Backend):
        if not all(isinstance(x, GenerationRequest) for x in inputs):
            raise TypeError("a Backend drives message-view episodes only")
        return [texts[0] if texts else "" for texts in model.generate(inputs)]
    if any(isinstance(x, GenerationRequest) for x in inputs):
        raise TypeError("a token generator drives token-view episodes only")
    ids, logps = model(inputs)
    return [TokenStep(list(ids[j]), None if logps is None else list(logps[j])) for j in range(len(runs))]
