"""The episode driver in its message view: turns and steps as recorded, the one rendering of tool
results, every stop rule, nudges and user simulators, batching, and hostile step texts."""

from __future__ import annotations

import functools
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooltune.data.synthetic.chain_tasks import chain_tasks
from tooltune.data.synthetic.quickstart_task import TaskConfig, make_multi_step_splits
from tooltune.environments import ToolResult, make_environment
from tooltune.generation import (
    ASK,
    END,
    Dialogue,
    EpisodeConfig,
    EpisodeRun,
    GenerationRequest,
    MessageContext,
    NamedResult,
    Reply,
    ScriptedBackend,
    SimulatedUser,
    Step,
    StopRules,
    TokenContext,
    drive,
    step_decoder,
    tool_messages,
)
from tooltune.prompts import render_answer
from tooltune.schema import Sample, ToolCall

TEMPLATE = "tool_n1"
NO_CALL = render_answer([], TEMPLATE)


@functools.cache
def chain_task_list() -> list[Sample]:
    splits = make_multi_step_splits(TaskConfig(n_train=30, n_val=0, n_heldout=0, n_unseen=0))
    return chain_tasks(splits["train"])


@pytest.fixture(scope="module")
def tasks() -> list[Sample]:
    return chain_task_list()


def goal(task: Sample) -> list[ToolCall]:
    return [ToolCall.from_dict(c) for c in task.meta["env"]["goal"]]


class Questions(Dialogue):
    """User turns from a list: the task's own request, then each further question; then the end."""

    def __init__(self, task: Sample, more: list[str] = ()) -> None:
        self.turns = [list(task.messages)] + [[{"role": "user", "content": q}] for q in more]

    def opening(self, run: EpisodeRun) -> Reply:
        return Reply.turn(self.turns[0])

    def after_answer(self, run: EpisodeRun, step: Step) -> Reply:
        return Reply.turn(self.turns[run.turn + 1]) if run.turn + 1 < len(self.turns) else END


def episode(task: Sample, dialogue: Dialogue | None = None, rules: StopRules | None = None) -> EpisodeRun:
    env = make_environment("synthetic_chain")
    env.reset(task)
    return EpisodeRun(env, MessageContext(EpisodeConfig(), task.id), dialogue or Questions(task),
                      rules or StopRules(step_limit=20), step_decoder(TEMPLATE), task.id)


def play(steps: dict[tuple[int, int], str], default: str = NO_CALL) -> tuple[ScriptedBackend, list]:
    """A backend writing steps[(turn, step)] (else `default`), recording every request."""
    seen: list[GenerationRequest] = []

    def fn(r: GenerationRequest) -> str:
        seen.append(r)
        return steps.get((r.meta["turn"], r.meta["step"]), default)

    return ScriptedBackend(fn), seen


def test_turns_steps_and_tool_messages_are_recorded_as_played(tasks: list[Sample]) -> None:
    task = tasks[0]
    first, second = goal(task)
    run = episode(task, Questions(task, ["And then?"]))
    one, two = render_answer([first], TEMPLATE), render_answer([second], TEMPLATE)
    backend, seen = play({(0, 0): one, (1, 0): two})
    done: list[EpisodeRun] = []
    drive([run], backend, done.append)
    rec = run.record
    assert done == [run] and rec.end == "answer" and run.executor.outcome().success
    assert [[r.meta["turn"], r.meta["step"]] for r in seen] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert rec.turn_texts == [[one, NO_CALL], [two, NO_CALL]]
    assert [len(s.results) for turn in rec.turn_steps for s in turn] == [1, 0, 1, 0] and rec.calls == 2
    # the tool results went back exactly as `tool_messages` renders them, right after their step
    history = run.context.history
    for turn in rec.turn_steps:
        for s in turn:
            if s.results:
                at = next(i for i, m in enumerate(history) if m["content"] == s.text)
                assert history[at + 1 : at + 1 + len(s.results)] == tool_messages(s.calls, s.results)
    # and the model saw them: the second turn's request carries the first call's result
    result = rec.turn_steps[0][0].results[0].content
    assert any(m["role"] == "tool" and m["content"] == result for m in seen[2].messages)


def test_named_results_name_their_tool_message() -> None:
    call = ToolCall("cd", {"folder": "x"})
    plain, named = ToolResult("ok"), NamedResult("ok", name="cd(folder='x')")
    assert tool_messages([call, call], [plain, named]) == [
        {"role": "tool", "name": "cd", "content": "ok"},
        {"role": "tool", "name": "cd(folder='x')", "content": "ok"},
    ]


def test_step_limit_runs_the_last_calls_then_force_terminates(tasks: list[Sample]) -> None:
    task = tasks[0]
    first, _ = goal(task)
    run = episode(task, rules=StopRules(step_limit=3))
    text = render_answer([first], TEMPLATE)
    backend, seen = play({}, default=text)
    drive([run], backend)
    rec = run.record
    assert rec.end == "turn_limit" and len(seen) == 3 and rec.turn_texts == [[text] * 3]
    assert all(s.results for s in rec.turn_steps[0]) and run.executor.calls_made == 3
    assert run.context.history[-1]["role"] == "assistant"  # the last results never went back


def test_finish_phrase_counts_from_the_configured_message_and_stops_calls(tasks: list[Sample]) -> None:
    task = tasks[0]
    first, second = goal(task)
    rules = StopRules(finish=("finish conversation",), finish_after=2, max_messages=40)
    # message 0 says the phrase: too early; message 1 is the tool result; message 2 says it next to a call
    says = "then I finish conversation"
    steps = {(0, 0): render_answer([first], TEMPLATE, reasoning=says),
             (0, 1): render_answer([second], TEMPLATE, reasoning=says)}
    run = episode(task, rules=rules)
    drive([run], play(steps)[0])
    assert run.record.end == "finish" and run.counted == 3
    assert [bool(s.results) for s in run.record.turn_steps[0]] == [True, False]  # the second call never ran
    assert run.executor.calls_made == 1

    class Finisher:
        tools: list = []

        def step(self, call: ToolCall) -> ToolResult:
            return ToolResult("finish conversation")

    quiet = EpisodeRun(Finisher(), MessageContext(EpisodeConfig(), "x"), Questions(task), rules,
                       step_decoder(TEMPLATE))
    drive([quiet], play({}, default=render_answer([first], TEMPLATE))[0])
    assert quiet.record.end == "finish" and quiet.counted == 4  # a result equal to the phrase, once allowed


def test_nudges_stay_in_their_turn_until_the_message_limit(tasks: list[Sample]) -> None:
    class Nudge(Questions):
        def after_answer(self, run: EpisodeRun, step: Step) -> Reply:
            return Reply.nudge("Use the tools.")

    run = episode(tasks[0], Nudge(tasks[0]), StopRules(max_messages=7))
    backend, seen = play({}, default="I would rather chat.")
    drive([run], backend)
    rec = run.record
    assert rec.end == "message_limit" and len(rec.turn_steps) == 1 and len(seen) == 4  # 4 replies, 3 nudges
    assert [s.nudged for s in rec.turn_steps[0]] == [True, True, True, False]
    assert [r.meta["step"] for r in seen] == [0, 1, 2, 3]
    assert run.context.history[-2:] == [{"role": "user", "content": "Use the tools."},
                                        {"role": "assistant", "content": "I would rather chat."}]


def test_a_user_simulator_opens_and_answers_turns(tasks: list[Sample]) -> None:
    task = tasks[0]

    class Simulated(SimulatedUser):
        def opening(self, run: EpisodeRun) -> Reply:
            return ASK

        def after_answer(self, run: EpisodeRun, step: Step) -> Reply:
            return ASK if run.turn < 1 else END

        def user_request(self, run: EpisodeRun) -> GenerationRequest:
            return GenerationRequest([{"role": "user", "content": "speak"}], id=run.id,
                                     meta={"role": "user", "turn": run.turn})

    said: list[int] = []
    user = ScriptedBackend(lambda r: said.append(r.meta["turn"]) or task.messages[0]["content"])
    run = episode(task, Simulated())
    assert run.wants() == "user"
    drive([run], play({})[0], user=user)
    assert said == [-1, 0] and run.record.end == "answer" and len(run.record.turn_steps) == 2
    assert [m["role"] for m in run.context.history] == ["user", "assistant", "user", "assistant"]
    with pytest.raises(ValueError, match="user simulator"):
        drive([episode(task, Simulated())], play({})[0])


def test_drive_batches_parallel_episodes_and_checks_the_view(tasks: list[Sample]) -> None:
    sizes: list[int] = []

    class Counting(ScriptedBackend):
        def generate(self, requests: list[GenerationRequest]) -> list[list[str]]:
            sizes.append(len(requests))
            return super().generate(requests)

    runs = [episode(t) for t in tasks[:5]]
    order: list[str] = []
    drive(iter(runs), Counting(lambda r: NO_CALL), lambda r: order.append(r.id), parallel=2)
    assert sizes == [2, 2, 1] and order == [t.id for t in tasks[:5]]
    tokens = TokenContext([1, 2], types.SimpleNamespace(eos_token_id=0))
    token_run = EpisodeRun(make_environment("synthetic_chain"), tokens, rules=StopRules(step_limit=1))
    with pytest.raises(TypeError, match="message-view"):
        drive([token_run], Counting(lambda r: NO_CALL))
    with pytest.raises(TypeError, match="token-view"):
        drive([episode(tasks[0])], lambda contexts: ([[0] for _ in contexts], None))


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_step_text_keeps_the_episode_consistent(text: str) -> None:
    task = chain_task_list()[0]
    run = episode(task, rules=StopRules(step_limit=2, finish=("stop",), max_messages=5))
    for t in (text, f"<tool_call>{text}</tool_call>", f"<think>x</think><tool_call>[{text}]</tool_call>"):
        if not run.done:
            run.feed(t)
    rec = run.record
    assert rec.turns == len(rec.texts) <= 3 and rec.well_formed <= rec.turns
    assert rec.calls == sum(len(s.results) for turn in rec.turn_steps for s in turn)
    assert all(not s.results or len(s.results) == len(s.calls or []) for turn in rec.turn_steps for s in turn)


class SlowTools:
    """An executor whose calls sleep and log (episode, call, start, end, thread); `concurrency` as the
    `mcp` environment sets it, or None (the caller's thread)."""

    def __init__(self, name: str, log: list, concurrency: tuple[str, int] | None, seconds: float = 0.05):
        self.name, self.log, self.concurrency, self.seconds = name, log, concurrency, seconds
        self.tools: list = []

    def step(self, call: ToolCall) -> ToolResult:
        import threading
        import time

        start = time.perf_counter()
        time.sleep(self.seconds)
        self.log.append((self.name, call.arguments["i"], start, time.perf_counter(),
                         threading.current_thread().name))
        return ToolResult(f"{self.name}:{call.arguments['i']}")


def slow_runs(tasks: list[Sample], log: list, concurrency: tuple[str, int] | None) -> list[EpisodeRun]:
    return [EpisodeRun(SlowTools(f"e{k}", log, concurrency), MessageContext(EpisodeConfig(), f"e{k}"),
                       Questions(tasks[k]), StopRules(step_limit=2), step_decoder(TEMPLATE), f"e{k}")
            for k in range(8)]


def in_flight_at_most(log: list) -> int:
    """The most calls that overlapped in time."""
    edges = sorted([(s, 1) for _, _, s, _, _ in log] + [(e, -1) for _, _, _, e, _ in log])
    now = peak = 0
    for _, d in edges:
        now += d
        peak = max(peak, now)
    return peak


def test_calls_of_different_episodes_run_side_by_side_within_the_server_limit(tasks: list[Sample]) -> None:
    """The figure: 8 episodes x 3 calls, at most 4 in flight per server; each episode's calls in order
    on one worker thread (the bench measures 8 x 2 s calls finishing in about 2 s)."""
    calls = render_answer([ToolCall("f", {"i": i}) for i in range(3)], TEMPLATE)
    log: list = []
    backend, _ = play({(0, 0): calls})
    runs = slow_runs(tasks, log, ("server-a", 4))
    drive(runs, backend)
    assert len(log) == 24 and 1 < in_flight_at_most(log) <= 4
    for k in range(8):
        mine = [entry for entry in log if entry[0] == f"e{k}"]
        assert [entry[1] for entry in mine] == [0, 1, 2]  # the episode's own order
        assert all(a[3] <= b[2] for a, b in zip(mine, mine[1:], strict=False))  # one after another
        assert len({entry[4] for entry in mine}) == 1 and mine[0][4].startswith("tooltune-tools")
        results = [r.content for r in runs[k].record.turn_steps[0][0].results]
        assert results == [f"e{k}:0", f"e{k}:1", f"e{k}:2"]
        assert any(m["role"] == "tool" and m["content"] == f"e{k}:2" for m in runs[k].context.history)


def test_executors_without_concurrency_run_their_calls_on_the_callers_thread(tasks: list[Sample]) -> None:
    import threading

    calls = render_answer([ToolCall("f", {"i": 0})], TEMPLATE)
    log: list = []
    backend, _ = play({(0, 0): calls})
    drive(slow_runs(tasks, log, None), backend)
    assert len(log) == 8 and in_flight_at_most(log) == 1
    assert {entry[4] for entry in log} == {threading.current_thread().name}
