"""The time budget of one environment step: no model output can make a step run for ever.

Every `Environment.step` runs under `step_budget(env.step_seconds)` (`STEP_SECONDS` by default), and a
benchmark's own executor can run its calls under the same budget. A step that runs past its budget is
stopped and becomes a failed step whose tool message says why; the episode goes on with the next call.

How a step is stopped: on the main thread of a POSIX process the budget arms a one-shot real-time
alarm (`signal.setitimer`) whose handler raises `StepTimeout` in the running Python code, so a pure
Python loop is cut off at its budget. `StepTimeout` derives from `BaseException`, so an API method's own
``except Exception`` cannot swallow it. An environment keeps its own bookkeeping (restoring a state
after a failed call) inside `shielded()`: an alarm that comes due there is held back until the
shielded block ends. The alarm is not used (and the budget is checked once the step returns) on another
thread, where no signal handler can run, inside another budget, and when another real-time timer is
armed in the process (the caller's own timeout): such a step is not cut short, but a step that took
longer than its budget still counts as failed.

What no alarm can stop is a single long computation inside C code (one huge integer power, one huge
allocation): Python runs the handler only when that call returns. Arguments that make a known method
compute that long are refused before the call by per-method argument limits
(`tooltune.environments.bfcl_limits` for BFCL's classes); the budget covers everything else.

Cost: arming and disarming the alarm takes a few microseconds per step (bench/env_steps.py).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

STEP_SECONDS = 5.0
"""Default time budget of one environment step, in seconds (BFCL's and ACEBench's API calls take
milliseconds; a budget two orders of magnitude above that stops only runaway steps)."""


class StepTimeout(BaseException):
    """A step ran past its time budget. A `BaseException`, so that an API method's ``except Exception``
    cannot swallow it; `Environment.step` turns it into a failed step."""


class _State(threading.local):
    def __init__(self) -> None:
        self.active = False  # a budget's alarm is armed on this thread
        self.shield = 0  # depth of shielded() blocks
        self.pending = False  # the alarm came due inside a shielded block
        self.what, self.seconds = "", 0.0


_STATE = _State()


def _on_alarm(signum: int, frame: object) -> None:
    state = _STATE
    if not state.active:
        return
    if state.shield:
        state.pending = True
        return
    state.active = False  # one StepTimeout per budget
    raise StepTimeout(timeout_message(state.what, state.seconds))


def _can_arm() -> bool:
    """Whether this thread may set the alarm: the main thread, a POSIX timer, no budget already armed and
    no other real-time timer running."""
    return (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
            and not _STATE.active and signal.getitimer(signal.ITIMER_REAL)[0] == 0.0)


def timeout_message(what: str, seconds: float) -> str:
    """The reason a stopped step reports."""
    return f"{what}: stopped after its time budget of {seconds:g} s (the call ran too long)"


@contextmanager
def step_budget(seconds: float, what: str = "step") -> Iterator[None]:
    """Run the block as one step of at most `seconds` (0 or less: no budget); raise `StepTimeout`
    (message: `timeout_message(what, seconds)`) when it runs longer (see the module docstring)."""
    if seconds <= 0:
        yield
        return
    start = time.monotonic()
    armed = _can_arm()
    previous = None
    if armed:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        _STATE.active, _STATE.pending, _STATE.what, _STATE.seconds = True, False, what, seconds
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if armed:
            try:
                _STATE.active = False
            finally:  # runs even when the alarm fires on the line above
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                _STATE.pending = False
    if not armed and time.monotonic() - start > seconds:
        raise StepTimeout(timeout_message(what, seconds))


@contextmanager
def shielded() -> Iterator[None]:
    """Hold back a step's alarm while the block runs (an environment restoring its state must finish);
    an alarm that came due meanwhile fires again as soon as the block ends."""
    state = _STATE
    state.shield += 1
    try:
        yield
    finally:
        state.shield -= 1
        if not state.shield and state.pending and state.active:
            state.pending = False
            signal.setitimer(signal.ITIMER_REAL, 1e-3)  # only the arming (main) thread sets `active`
