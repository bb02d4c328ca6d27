"""A synchronous, bounded client of one MCP server, on the official `mcp` SDK (imported when used).

A server (`data.McpServer`) is a command started as a subprocess and spoken to over its stdin and
stdout (`stdio.stdio_transport`), or the URL of a streamable HTTP endpoint (`http`); both read
the server's messages through `wire` (one message held up to ``message_bytes``, a longer one cut,
text that is not MCP ending the session at once, tools with bad input schemas left out). `McpConnection`
is one MCP session with it. The SDK is asynchronous; every connection runs as one task on a background
event loop thread that the process shares (started at the first connection), and each synchronous
method waits for it under a deadline of its own, so no server can hang the caller:

- `start()` returns at once (many servers start side by side); the first use waits at most
  `start_seconds` for the handshake, and a server that does not complete it in time is stopped;
- `call(name, arguments, seconds)` waits at most `seconds` for the result (the SDK's request timeout);
  then the server is probed with a tools/list request (`PROBE_SECONDS`): one that answers has only
  abandoned that call, one that does not hangs, and the connection is `broken`;
- a server that exits, closes the connection or writes text that is not MCP breaks it too; every later
  use fails at once with `McpUnavailable`, whose message names the server by `McpServer.name` only (it
  becomes a tool message; no command line, folder or stderr in it), while `broken` keeps the full
  reason with the tail of a command server's stderr for the logs;
- `close()` ends the session and, for a command, the server's whole process group (`stdio`), every
  wait bounded. Connections still open when the interpreter exits are closed then, and a watchdog
  process ends the groups of servers left when tooltune is killed (`reaper`);
- with ``fresh_dir`` the server runs in a new empty folder of its own (its working directory), made
  before it starts, where the ``prepare`` command runs first, and removed when the session ends: the
  reset of a server that keeps its state in files.

`ConnectionPool` keeps idle connections to one server for reuse by the next episode (servers reset
through a tool instead of restarted).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import math
import os
import re
import shutil
import tempfile
import threading
from typing import Any

from tooltune.environments.mcp.data import McpResult, McpServer, convert_result
from tooltune.environments.mcp.http import http_transport
from tooltune.environments.mcp.reaper import REAPER
from tooltune.environments.mcp.stdio import PrepareFailed, StderrTail, prepare_folder, stdio_transport
from tooltune.environments.mcp.wire import MESSAGE_BYTES, Wire
from tooltune.schema import SchemaError, ToolSpec

logger = logging.getLogger(__name__)

START_SECONDS = 30.0
"""Default time a server has to start and complete the MCP handshake."""
CALL_SECONDS = 10.0
"""Default time one tool call may take (list_tools too)."""
PROBE_SECONDS = 2.0
"""Time a server has to answer the liveness probe (a tools/list request) that follows a call without a
result."""
CLOSE_SECONDS = 10.0
"""Time `close` waits for the session and its process to end (the SDK's stdio shutdown waits at most
about 6.5 s: 2 s for the server to exit once its stdin is closed, 2 s after SIGTERM, then SIGKILL)."""
MAX_TOOL_PAGES = 100
"""Pages of a tools/list answer read at most (a server that paginates for ever cannot hang us)."""
LIST_CALLS = 3
"""The whole tool listing (every page) takes at most this many times `call_seconds`."""
_GRACE = 2.0  # seconds of slack between the SDK's own timeout and our wait for it


class McpUnavailable(RuntimeError):
    """The server cannot be used: it did not start, it exited, it hangs, or the session is closed. The
    message names the server by `McpServer.name` and holds no folder paths (a model may read it)."""


_PATH = re.compile(r"(?<![\w.~+:-])/(?:[\w.~+-]+/)+([\w.~+-]*)")


def without_paths(text: str) -> str:
    """`text` with every absolute POSIX path replaced by its last component."""
    return _PATH.sub(r"\1", text)


def _describe(err: BaseException) -> str:
    """An exception (the first leaf of the SDK's exception groups) in one line."""
    while getattr(err, "exceptions", None):
        err = err.exceptions[0]  # type: ignore[attr-defined]
    text = str(err).strip().replace("\n", " ")
    return f"{type(err).__name__}: {text}"[:300] if text else type(err).__name__


class _LoopThread:
    """The event loop every connection of this process runs on, in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="tooltune-mcp", daemon=True)
        self.thread.start()

    def submit(self, coro: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


_LOCK = threading.RLock()  # re-entrant: a finalizer may close a connection while this thread holds it
_LOOP: _LoopThread | None = None
_OPEN: set[McpConnection] = set()
"""Connections started and not yet ended (closed at interpreter exit)."""


def _shared_loop() -> _LoopThread:
    global _LOOP
    with _LOCK:
        if _LOOP is None:
            _LOOP = _LoopThread()
            atexit.register(close_all)
        return _LOOP


def _forget_after_fork() -> None:
    """A forked child has no loop thread: it starts its own and never touches its parent's servers."""
    global _LOOP
    _LOOP = None
    _OPEN.clear()
    REAPER.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def close_all(seconds: float = CLOSE_SECONDS) -> None:
    """Close every open connection of this process (at interpreter exit, and for tests)."""
    with _LOCK:
        conns = list(_OPEN)
    for c in conns:
        c.close(wait=False)
    for c in conns:
        c.wait_closed(seconds)


def open_connections() -> int:
    """Connections of this process that are started and not yet ended."""
    with _LOCK:
        return len(_OPEN)


class McpConnection:
    """One MCP session with one server (module docstring). Not for concurrent use by several threads."""

    def __init__(self, server: McpServer, start_seconds: float = START_SECONDS,
                 call_seconds: float = CALL_SECONDS, message_bytes: int = MESSAGE_BYTES,
                 fresh_dir: bool = False, prepare: tuple[str, ...] = ()) -> None:
        self.server, self.start_seconds, self.call_seconds = server, start_seconds, call_seconds
        self.fresh_dir, self.prepare = fresh_dir, prepare
        self.wire = Wire(server.describe(), message_bytes)
        self.workdir = ""
        """The server's own folder while it runs (``fresh_dir``)."""
        self.broken = ""
        """Why the connection can no longer be used ('' while it can), with the stderr tail."""
        self.public = ""
        """The same reason as a model may read it (`McpUnavailable`'s message)."""
        self._client: Any = None
        self._scope: Any = None
        self._closing = asyncio.Event()
        self._ready: concurrent.futures.Future = concurrent.futures.Future()
        self._done: concurrent.futures.Future = concurrent.futures.Future()
        self.stderr = StderrTail()
        """The end of a command server's stderr (the reason a dead server gives quotes it)."""
        self._loop: _LoopThread | None = None
        self._tools: list[ToolSpec] | None = None
        self.list_cut = ""
        """Why the tool list is incomplete ('' when it is whole): it was still paging at `MAX_TOOL_PAGES`."""
        self.closed = False
        self.episodes = 0
        """Episodes this connection served before (counted by `ConnectionPool.give`)."""

    def start(self) -> McpConnection:
        """Start the server (a command) or connect (a URL) in the background; returns at once. Without the
        SDK installed it raises ModuleNotFoundError here, in the caller's thread."""
        if self._loop is None and not self.closed:
            import mcp  # noqa: F401  # deferred: mcp is optional; a missing SDK fails here, not on the loop
            self._loop = _shared_loop()
            with _LOCK:
                _OPEN.add(self)
            self._loop.submit(self._hold())
        return self

    def _transport(self) -> Any:
        if self.server.url:
            return http_transport(self.server.url, self.wire)
        return stdio_transport(self.server, self.wire, self.stderr, self.workdir)

    async def _hold(self) -> None:
        """The session's lifetime, as one task: connect, publish the client, wait for `close`."""
        import anyio  # deferred: comes with mcp
        from mcp import Client  # deferred: mcp is optional

        try:
            if self._closing.is_set():
                raise McpUnavailable("closed before it started")
            with anyio.CancelScope(deadline=anyio.current_time() + self.start_seconds) as scope:
                self._scope = scope
                if self.fresh_dir:
                    self.workdir = tempfile.mkdtemp(prefix="tooltune-mcp-")
                    try:
                        await prepare_folder(self.workdir, self.prepare, self.start_seconds, self.stderr)
                    except PrepareFailed as e:
                        raise McpUnavailable(str(e)) from None
                async with Client(self._transport(), read_timeout_seconds=self.call_seconds) as client:
                    scope.deadline = math.inf
                    self._client = client
                    self._ready.set_result(None)
                    await self._closing.wait()
            if not self._ready.done():
                raise McpUnavailable("closed before it started" if self._closing.is_set()
                                     else f"no MCP handshake within {self.start_seconds:g} s")
        except BaseException as e:  # the SDK's errors arrive as exception groups of its task groups
            why = self.wire.problem or (str(e) if isinstance(e, McpUnavailable) else _describe(e))
            if not self._ready.done():
                self._ready.set_exception(McpUnavailable(self._mark(f"the server did not start: {why}")))
            elif not self.closed:
                self._mark(f"the session ended: {why}")
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            self._client = None
            if self.workdir:
                await asyncio.to_thread(shutil.rmtree, self.workdir, True)
            with _LOCK:
                _OPEN.discard(self)
            self._done.set_result(None)

    def _reason(self, why: str) -> str:
        """`why`, followed by the server's last stderr lines when it is a command."""
        tail = self.stderr.text(600)
        where = f"MCP server {self.server.describe()!r:.200}"
        return f"{where}: {why}" + (f" (its stderr ends: {tail[-300:]!r})" if tail else "")

    def _mark(self, why: str) -> str:
        """Break the connection for `why` (the first reason stays); returns the reason in effect as a
        model may read it (`public`)."""
        if self.wire.problem and self.wire.problem not in why:
            why = f"{why}: {self.wire.problem}"
        if not self.broken:
            self.broken = self._reason(why)
            self.public = without_paths(f"MCP server {self.server.name!r}: {why}")[:600]
            logger.warning("%s", self.broken)
        return self.public

    def wait_ready(self) -> Any:
        """The connected SDK client, waiting for the handshake at most `start_seconds`; raises
        `McpUnavailable` with the reason when the server cannot be used."""
        if self.closed:
            raise McpUnavailable(self.public or "the connection is closed")
        self.start()
        try:
            self._ready.result(self.start_seconds + _GRACE)
        except concurrent.futures.TimeoutError:
            self.close(wait=False)
            raise McpUnavailable(self._mark(f"no MCP handshake within {self.start_seconds:g} s")) from None
        except McpUnavailable:
            raise
        if self.broken or self._client is None:
            raise McpUnavailable(self._mark("the session ended"))
        return self._client

    def _wait(self, coro: Any, seconds: float, what: str) -> Any:
        """Run `coro` on the loop and wait at most `seconds`; anything that interrupts the wait (the
        step's own budget) abandons the request and breaks the connection: its fate is unknown."""
        assert self._loop is not None
        fut = self._loop.submit(coro)
        try:
            return fut.result(seconds)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise McpUnavailable(self._mark(f"{what}: no answer within {seconds:g} s")) from None
        except McpUnavailable:
            raise
        except BaseException:
            fut.cancel()
            self._mark(f"{what}: interrupted while waiting for the server")
            raise

    def call(self, name: str, arguments: dict[str, Any], seconds: float | None = None) -> McpResult:
        """Call tool `name`; at most `seconds` (default `call_seconds`) for the result. A result the server
        flags as an error, a protocol error and an abandoned call are results with ``error``; a server
        that is gone or hangs raises `McpUnavailable` (and breaks the connection)."""
        client = self.wait_ready()
        seconds = self.call_seconds if seconds is None else seconds
        return self._wait(self._call(client, name, arguments, seconds), seconds + PROBE_SECONDS + _GRACE,
                          f"call {name!r:.80}")

    async def _call(self, client: Any, name: str, arguments: dict[str, Any], seconds: float) -> McpResult:
        from mcp import MCPError  # deferred: mcp is optional
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT  # deferred: mcp is optional

        try:
            return convert_result(await client.call_tool(name, arguments, read_timeout_seconds=seconds))
        except MCPError as e:
            if e.code == CONNECTION_CLOSED:
                raise McpUnavailable(self._mark(f"the connection closed during call {name!r:.80}")) from None
            if e.code != REQUEST_TIMEOUT:
                return McpResult(f"MCP error {e.code}: {e.message}"[:2000], None, error=True)
        except Exception as e:  # a transport failure or a result that does not fit the protocol
            raise McpUnavailable(self._mark(f"call {name!r:.80} failed: {_describe(e)}")) from None
        if not await self._answers(client):
            raise McpUnavailable(self._mark(
                f"call {name!r:.80} got no result within {seconds:g} s and the server did not answer a "
                f"tools/list probe within {PROBE_SECONDS:g} s: it hangs"))
        return McpResult(f"{name}: no result within {seconds:g} s (the call was abandoned)", None,
                         error=True, timed_out=True)

    async def _answers(self, client: Any) -> bool:
        """Whether the server answers a fresh tools/list within `PROBE_SECONDS` (the liveness probe every
        protocol version has: ping is gone from the 2026 revisions)."""
        import anyio  # deferred: comes with mcp

        try:
            with anyio.fail_after(PROBE_SECONDS):
                await client.list_tools(cache_mode="refresh")
        except Exception:  # TimeoutError, or the connection went away meanwhile
            return False
        return True

    def list_tools(self) -> list[ToolSpec]:
        """The server's tools as `ToolSpec`s (name, description, input schema), every page, listed once per
        connection, each name once; a tool with a bad input schema (`schema.tool_problem`) is left out with
        a one-line warning naming it and why, and a list cut after `MAX_TOOL_PAGES` pages says so
        (`list_cut`)."""
        if self._tools is None:
            client = self.wait_ready()
            self._tools = self._wait(self._list_tools(client), LIST_CALLS * self.call_seconds + _GRACE,
                                     "tools/list")
        return list(self._tools)

    async def _list_tools(self, client: Any) -> list[ToolSpec]:
        """Every page of the tool list, each name once (the first listing of a name wins); a list still
        paging after `MAX_TOOL_PAGES` pages is cut there, with a warning that says so (`list_cut`)."""
        out: dict[str, ToolSpec] = {}
        cursor, pages, repeated = None, 0, 0
        try:
            while pages < MAX_TOOL_PAGES:
                page = await client.list_tools(cursor=cursor)
                pages += 1
                for tool in page.tools:
                    if tool.name in out:
                        repeated += 1
                        continue
                    raw = {"name": tool.name, "description": tool.description or "",
                           "parameters": tool.input_schema}
                    try:
                        out[tool.name] = ToolSpec.from_dict(raw, f"tool {tool.name!r:.80}")
                    except SchemaError as e:
                        logger.warning("MCP server %r: tool %r left out: %s", self.server.describe(),
                                       tool.name[:80], e)
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as e:
            raise McpUnavailable(self._mark(f"tools/list failed: {_describe(e)}")) from None
        if cursor:
            self.list_cut = (f"the tool list was cut after {pages} pages (it was still paging): "
                             f"{len(out)} distinct tools read, {repeated} listed again")
            logger.warning("MCP server %r: %s", self.server.describe(), self.list_cut)
        elif repeated:
            logger.warning("MCP server %r: %d tools listed more than once; each kept once",
                           self.server.describe(), repeated)
        return list(out.values())

    def _abort(self) -> None:
        """On the loop: end the session (or the start in progress)."""
        self._closing.set()
        if self._client is None and self._scope is not None:
            self._scope.cancel()

    def close(self, wait: bool = True) -> None:
        """End the session and stop a command server (bounded: `CLOSE_SECONDS`); idempotent. With
        ``wait=False`` it returns at once and the shutdown finishes in the background."""
        first = not self.closed
        self.closed = True
        if self._loop is None:
            return
        if first:
            try:
                self._loop.loop.call_soon_threadsafe(self._abort)
            except RuntimeError:  # the loop is already closed (interpreter exit)
                pass
        if wait:
            self.wait_closed(CLOSE_SECONDS)

    def wait_closed(self, seconds: float) -> bool:
        """Wait at most `seconds` for the session to end; whether it did."""
        if self._loop is None:
            return True
        try:
            self._done.result(seconds)
        except concurrent.futures.TimeoutError:
            logger.warning("MCP server %r: still shutting down after %g s", self.server.describe(), seconds)
            return False
        return True

    @property
    def ended(self) -> bool:
        """The session's task has finished (closed, failed to start, or ended)."""
        return self._done.done()


class ConnectionPool:
    """Idle, healthy connections per server, reused by later episodes (a server reset through a tool is
    not restarted). `take` gives an idle one or starts a new one; `give` keeps a connection for reuse,
    or closes it when it is broken, closed or the server has `max_idle` idle ones already."""

    def __init__(self, max_idle: int = 64) -> None:
        self.max_idle = max_idle
        self._idle: dict[tuple[McpServer, float, float, int], list[McpConnection]] = {}
        self._lock = threading.RLock()

    def take(self, server: McpServer, start_seconds: float = START_SECONDS,
             call_seconds: float = CALL_SECONDS, message_bytes: int = MESSAGE_BYTES) -> McpConnection:
        key = (server, start_seconds, call_seconds, message_bytes)
        with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                conn = idle.pop()
                if not (conn.broken or conn.closed or conn.ended):
                    return conn
        return McpConnection(server, start_seconds, call_seconds, message_bytes).start()

    def give(self, conn: McpConnection) -> None:
        key = (conn.server, conn.start_seconds, conn.call_seconds, conn.wire.cap)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if not (conn.broken or conn.closed or conn.ended) and len(idle) < self.max_idle:
                conn.episodes += 1
                idle.append(conn)
                return
        conn.close(wait=False)

    def clear(self) -> None:
        """Close every idle connection."""
        with self._lock:
            conns = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for c in conns:
            c.close(wait=False)
        for c in conns:
            c.wait_closed(CLOSE_SECONDS)


POOL = ConnectionPool()
"""The process's pool (the `mcp` environment's episodes that reset through a tool share it)."""
