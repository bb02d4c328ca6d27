"""The `mcp` environment: the tools of any Model Context Protocol server as a training environment.

An episode talks to one MCP server through the official `mcp` SDK (`tooltune.environments.mcp.client`;
the SDK is optional and imported when a server is used): the server's tools, listed over the protocol,
are what a call is checked against; each parsed call the model makes becomes one MCP tool call, and its
result is the tool message. The outcome is the check the task names.

Task (``meta["env"]``, name ``mcp``):

- ``server``: where the server is (`data.McpServer.parse`): a command line or argv list, started as a
  subprocess and spoken to over stdio; an ``http://`` / ``https://`` URL of a streamable HTTP endpoint;
  or an object with ``command`` or ``url``, and ``env`` / ``cwd`` for a command. A task without one
  uses the environment's ``server`` setting (`McpSettings`).
- ``reset``: how an episode starts from a clean state. ``"restart"`` (the default for a command): a
  fresh server process per episode, which resets only the state the process holds in memory.
  ``"fresh_dir"``: a fresh process as well, started in a new empty folder of its own (its working
  directory, removed when the episode ends), for servers that keep their state in files under it
  (a git repository, a SQLite file); ``prepare``, a command line or argv list, runs in that folder
  before the server starts (``git init -q``) and must exit with status 0.
  ``{"tool": name, "arguments": {...}}``: one server serves episode after episode (idle servers are
  pooled, `client.POOL`) and this call resets it before each. ``"none"``: nothing is reset (a
  server whose state does not matter). A URL needs a reset tool or ``"none"``: a remote server cannot
  be restarted. A server whose state lives elsewhere (a database server, a folder named by an
  absolute path in its arguments) is reset by none of the restarts: give it a reset tool.
- ``setup``: calls run after the reset and before the model acts (the task's initial state); each must
  succeed.
- ``check``: one check or a list of them, all of which must hold:
  ``{"kind": "calls", "calls": [...], "ignore": [tool names]}``: the calls that succeeded during the
  episode, those of the ``ignore`` tools (optional: read-only tools, say) left out, equal these as a
  multiset (`tooltune.matching`: typed values, argument and call order free; a repeated call counts
  twice); ``{"kind": "result", "call": {"name", "arguments"}, "equals": value}``: after the episode this
  read-only call is made and its value (`data.result_value`) must equal ``value`` (typed);
  ``{"kind": "answer", "contains": [...]}``: the final answer text contains every string, compared
  case-folded with runs of whitespace as one space.

A step: the name must be a tool the task offers and the server lists; the arguments must be plain JSON
literals (`check_literals`), name no argument outside the tool's input schema and validate against
that schema (`task.check_call`); only then is the call sent, with the per-call timeout
(``call_seconds``), and the result text is cut to ``result_chars``, noting the full length (a result
longer than ``message_bytes`` is cut while it is read, before it is all in memory, and the note gives
its size in bytes). A result the server flags as an error, a protocol error and a call without a
result in time are failed steps that say why. A server that exits, closes the connection, writes
text that is not MCP or hangs (a call without a result and no answer to the probe that follows) fails
the step with the reason, and every later step of the episode fails at once with it; the outcome then
fails too (``details["server"]``: the full reason, with the tail of the server's stderr; the tool
message names the server by its short name, `McpServer.name`, without folders). Nothing from the
model runs here: a call is a name and JSON arguments sent to the server. The step's time budget
(`Environment.step_seconds`) is set above the per-call timeout, as a guard; a server's start, reset
and setup run before the step, under their own deadlines. The episode driver runs the calls of
different episodes side by side, at most ``server_calls`` at once per server (`concurrency`).

The server of an episode is released when the episode is judged (`outcome`), when the environment is
reset or closed, and when it is garbage collected: a restarted server is stopped, a pooled one goes
back to the pool.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, replace
from typing import Any

from tooltune.config import option
from tooltune.environments.base import (
    MAX_RESULT_CHARS,
    Environment,
    Outcome,
    TaskError,
    ToolResult,
    check_literals,
    error_result,
    register_environment,
    spec_by_name,
)
from tooltune.environments.mcp.client import (
    CALL_SECONDS,
    POOL,
    PROBE_SECONDS,
    START_SECONDS,
    McpConnection,
    McpUnavailable,
)
from tooltune.environments.mcp.task import FRESH_DIR, Check, McpTask, check_call, read_task
from tooltune.environments.mcp.wire import MESSAGE_BYTES
from tooltune.matching import call_differences, values_equal
from tooltune.schema import Sample, SchemaError, ToolCall

__all__ = ["ENVIRONMENT", "McpEnvironment", "McpSettings"]

ENVIRONMENT = "mcp"


@dataclass
class McpSettings:
    """Settings of the `mcp` environment (defaults for every task; a task's own ``server`` wins).

    Each `McpEnvironment` holds the settings it was built with; whoever builds one passes them (the
    training config's ``mcp`` section, `make_environment`'s ``settings``, the integrations' classes)."""

    server: str = option(
        "", "MCP server of tasks that name none: a command line (started per episode, spoken to over "
        "stdio) or the http(s):// URL of a streamable HTTP endpoint."
    )
    call_seconds: float = option(CALL_SECONDS, "Per-call timeout in seconds (also for the reset, setup "
                                 "and result-check calls).", min_exclusive=0)
    start_seconds: float = option(START_SECONDS, "Time a server has to start and complete the MCP "
                                  "handshake, in seconds.", min_exclusive=0)
    result_chars: int = option(MAX_RESULT_CHARS, "Tool messages are cut to this many characters.", min=64)
    message_bytes: int = option(MESSAGE_BYTES, "Cap on one message from a server, in bytes, applied while "
                                "it is read: a longer tool result is cut there (its full size noted), "
                                "a longer answer to anything else fails that request.", min=4096)
    server_calls: int = option(8, "Tool calls in flight at once per server (command or URL) when the "
                               "episodes of a batch call tools side by side.", min=1)


def normalized(text: str) -> str:
    """Case-folded, with runs of whitespace as one space (the answer check's comparison)."""
    return re.sub(r"\s+", " ", text).strip().casefold()


@dataclass
class _Lease:
    """The server connection an episode holds, and how to give it back (kept apart from the environment
    so that a finalizer can release it)."""

    conn: McpConnection | None = None
    pooled: bool = False

    def release(self) -> None:
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if self.pooled:
            POOL.give(conn)
        else:
            conn.close(wait=False)


class McpEnvironment(Environment):
    """Any MCP server's tools (module docstring), under `settings` (default: `McpSettings()`)."""

    name = ENVIRONMENT

    def __init__(self, settings: McpSettings | None = None) -> None:
        super().__init__()
        # a copy: the caller's settings (a config section) may change later, this environment keeps its own
        self.settings = replace(settings) if settings is not None else McpSettings()
        self.step_seconds = self.settings.call_seconds + PROBE_SECONDS + 5.0
        self._lease = _Lease()
        self._finalizer = weakref.finalize(self, self._lease.release)
        self.spec: McpTask | None = None
        self.failure = ""
        """Why the server could not be used ('' while it can), in full (the outcome's details)."""
        self.public_failure = ""
        """The same as a model may read it (tool messages)."""
        self.executed: list[ToolCall] = []
        self.call_timeouts = 0
        self._prepared = False
        self._judged: Outcome | None = None
        self._server_tools: dict[str, Any] = {}

    # -- episode lifecycle --------------------------------------------------------------------------
    def _load(self, task: Sample, spec: dict[str, Any]) -> None:
        self._lease.release()
        try:
            self.spec = read_task(spec, self.settings.server)
        except (SchemaError, ValueError) as e:
            raise TaskError(f"sample {task.id!r}: {e}") from None
        self.offered = spec_by_name(task.tools)
        self.failure, self.public_failure, self.executed, self.call_timeouts = "", "", [], 0
        self._prepared, self._judged, self._server_tools = False, None, {}
        s = self.settings
        if self.spec.restarts:
            self._lease.conn = McpConnection(
                self.spec.server, s.start_seconds, s.call_seconds, s.message_bytes,
                fresh_dir=self.spec.reset == FRESH_DIR, prepare=self.spec.prepare).start()
            self._lease.pooled = False
        else:
            self._lease.conn = POOL.take(self.spec.server, s.start_seconds, s.call_seconds, s.message_bytes)
            self._lease.pooled = True

    @property
    def concurrency(self) -> tuple[str, int]:
        """The server this episode's calls go to and how many calls it takes at once (the episode
        driver runs the calls of different episodes side by side within that limit)."""
        server = self.spec.server.describe() if self.spec is not None else ""
        return f"mcp:{server}", self.settings.server_calls

    def _fail(self, error: McpUnavailable | str) -> None:
        """Record why the server cannot be used: in full for the outcome's details and logs, and as a
        model may read it (the server's short name, no folder paths) for tool messages."""
        conn = self._lease.conn
        self.public_failure = str(error)
        self.failure = (conn.broken if conn is not None and conn.broken else "") or self.public_failure

    def _prepare(self) -> None:
        """Once per episode, before its first step or its judgement: wait for the server, list its tools,
        reset it (a reset tool) and run the setup calls. A failure is recorded in `failure`."""
        if self._prepared or self.spec is None:
            return
        self._prepared = True
        for attempt in (0, 1):
            conn = self._lease.conn
            if conn is None:
                self._fail("the episode's MCP server was released (close() before the episode ended)")
                return
            reused = conn.episodes > 0
            try:
                self._server_tools = spec_by_name(conn.list_tools())
                reset = [self.spec.reset] if isinstance(self.spec.reset, ToolCall) else []
                for c in reset + list(self.spec.setup):
                    r = conn.call(c.name, c.arguments)
                    if r.error:
                        self._fail(f"the task's {'reset' if c is self.spec.reset else 'setup'} call "
                                   f"{c.name!r:.80} failed: {r.text[:300]}")
                        return
                return
            except McpUnavailable as e:
                if attempt == 0 and self._lease.pooled and reused:  # an idle server died meanwhile
                    conn.close(wait=False)
                    s = self.settings
                    self._lease.conn = McpConnection(conn.server, s.start_seconds, s.call_seconds,
                                                     s.message_bytes).start()
                    continue
                self._fail(e)
                return

    def close(self) -> None:
        """Release the episode's server now (also done by `outcome`, `reset` and garbage collection)."""
        self._lease.release()

    def __enter__(self) -> McpEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- steps -------------------------------------------------------------------------------------
    def step(self, call: ToolCall) -> ToolResult:
        """Prepare the episode's server (first step only, under its own deadlines), then run the call
        under the step budget (`Environment.step`)."""
        self._prepare()
        return super().step(call)

    def _execute(self, call: ToolCall) -> ToolResult:
        if self._judged is not None or self._lease.conn is None:
            return error_result("the episode is over: its MCP server was released")
        if self.failure:
            return error_result(f"the MCP server is unavailable: {self.public_failure}")
        if call.name not in self.offered:
            return error_result(f"unknown tool {call.name!r:.80}; available: {sorted(self.offered)[:50]}")
        spec = self._server_tools.get(call.name)
        if spec is None:
            return error_result(f"tool {call.name!r:.80} is offered but the MCP server does not list it")
        problem = check_literals(call) or check_call(call, spec)
        if problem:
            return error_result(problem)
        try:
            result = self._lease.conn.call(call.name, call.arguments)
        except McpUnavailable as e:
            self._fail(e)
            return error_result(self.public_failure)
        self.call_timeouts += result.timed_out
        if not result.error:
            self.executed.append(call)
        return ToolResult(self._cut(result.text, result.cut_bytes), error=result.error)

    def _cut(self, text: str, cut_bytes: int = 0) -> str:
        """`text` within ``result_chars``, noting its full length (in bytes for a result already cut
        while it was read)."""
        cap = self.settings.result_chars
        if len(text) <= cap and not cut_bytes:
            return text
        marker = (f" … [cut: the server's answer was {cut_bytes} bytes in all]" if cut_bytes
                  else f" … [cut: {len(text)} characters in all]")
        return text[: cap - len(marker)] + marker

    # -- outcome -----------------------------------------------------------------------------------
    def outcome(self, final_text: str | None = None) -> Outcome:
        """Judge the episode by the task's checks, then release its server (a second call returns the
        same judgement)."""
        if self._judged is not None:
            return self._judged
        if self.spec is None:
            raise TaskError("outcome() before reset(): no task loaded")
        self._prepare()
        details: dict[str, Any] = {"server": self.failure, "call_timeouts": self.call_timeouts, "checks": []}
        ok = not self.failure
        for ch in self.spec.checks if ok else ():
            passed, info = self._judge(ch, final_text or "")
            details["checks"].append({"kind": ch.kind, "passed": passed, **info})
            ok = ok and passed
        details["server"] = self.failure
        self._judged = Outcome(ok, 1.0 if ok else 0.0, details)
        self._lease.release()
        return self._judged

    def _judge(self, ch: Check, final_text: str) -> tuple[bool, dict[str, Any]]:
        if ch.kind == "calls":
            counted = [c for c in self.executed if c.name not in ch.ignore]
            missing, extra = call_differences(counted, ch.calls)
            return not missing and not extra, {"missing": [c.to_dict() for c in missing],
                                               "extra": [c.to_dict() for c in extra]}
        if ch.kind == "answer":
            text = normalized(final_text)
            absent = [t for t in ch.contains if normalized(t) not in text]
            return not absent, {"absent": absent}
        assert ch.call is not None and self._lease.conn is not None
        try:
            r = self._lease.conn.call(ch.call.name, ch.call.arguments)
        except McpUnavailable as e:
            self._fail(e)
            return False, {"error": self.failure}
        if r.error:
            return False, {"error": r.text[:300]}
        return values_equal(r.value, ch.equals), {"value": r.value if len(r.text) <= 2000 else r.text[:2000]}


register_environment(ENVIRONMENT, McpEnvironment)
