"""The stdio transport of an MCP server started as a command: bounded reads, no process left behind.

`stdio_transport` starts the server and yields the pair of streams the SDK's client session reads and
writes (the SDK's transport interface), with these properties:

- the server's stdout is read in chunks of up to `CHUNK_BYTES` (through a pipe enlarged to
  `PIPE_BYTES` where Linux allows) and split into messages by `wire.MessageCutter`: time linear
  in the bytes, at most the cap of one message in memory, a message over the cap cut (`wire.Wire`);
- text on stdout that is not MCP ends the session at once (`Wire.problem` says what it was);
- stderr is read to its end and only its last `STDERR_BYTES` kept (`StderrTail`): a server that
  floods it costs neither memory nor disk;
- the server runs in a session and process group of its own; on Linux it also gets SIGKILL when the
  thread that started it (the connections' loop thread, which lives as long as the process) ends
  (``prctl(PR_SET_PDEATHSIG)``), and its group is listed with the watchdog (`reaper.REAPER`);
- on exit the server's stdin is closed, it has `EXIT_SECONDS` to exit, then its group gets SIGTERM and,
  `EXIT_SECONDS` later, SIGKILL; whatever is left of the group (helpers of a server that exited) gets
  SIGTERM and then SIGKILL too. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None  # type: ignore[assignment]

from tooltune.environments.mcp.data import McpServer
from tooltune.environments.mcp.reaper import REAPER, signal_group
from tooltune.environments.mcp.wire import MessageCutter, Wire

logger = logging.getLogger(__name__)

STDERR_BYTES = 4096
"""The last bytes of a server's stderr that are kept (quoted when it fails); the rest is dropped."""
CHUNK_BYTES = 1 << 18
"""Most bytes read from a server's stdout at once."""
PIPE_BYTES = 1 << 20
"""The size asked for the stdout pipe (fewer, larger reads)."""
EXIT_SECONDS = 2.0
"""Time a server has to exit once its stdin is closed, and again after SIGTERM."""
_PR_SET_PDEATHSIG = 1
_F_SETPIPE_SZ = 1031


class StderrTail:
    """The last `STDERR_BYTES` a server wrote on stderr: the pipe is read to its end and the rest
    dropped, so a server that floods its stderr costs neither memory nor disk."""

    def __init__(self) -> None:
        self.data = b""

    def add(self, chunk: bytes) -> None:
        self.data = (self.data + chunk[-STDERR_BYTES:])[-STDERR_BYTES:]

    def text(self, n: int) -> str:
        return self.data[-n:].decode("utf-8", "replace").strip()


async def drain(stream: asyncio.StreamReader | None, tail: StderrTail) -> None:
    """Read `stream` to its end into `tail`."""
    if stream is None:
        return
    try:
        while chunk := await stream.read(1 << 16):
            tail.add(chunk)
    except (ConnectionError, OSError):
        pass


def _child_setup() -> Callable[[], None] | None:
    """What the server's process runs before the command on Linux: ask for SIGKILL when its parent
    thread ends (and exit if the parent is already gone)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, not in the child
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:
            os._exit(1)

    return setup


def _enlarge(fd: int) -> None:
    if fcntl is None or not sys.platform.startswith("linux"):
        return
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), PIPE_BYTES)
    except OSError:  # above the user's pipe-size limit
        pass


async def _until(condition: Callable[[], bool], seconds: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def stop_process(proc: asyncio.subprocess.Process, pgid: int) -> None:
    """End the server and its whole group (module docstring), every wait bounded."""
    if proc.stdin is not None:
        proc.stdin.close()
    exited = await _until(lambda: proc.returncode is not None, EXIT_SECONDS)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if exited and not signal_group(pgid, 0):
            break
        signal_group(pgid, sig)
        exited = await _until(lambda: proc.returncode is not None and not signal_group(pgid, 0),
                              EXIT_SECONDS)
    if proc.returncode is None:
        logger.warning("MCP server process %d is still alive after SIGKILL; abandoning it", proc.pid)
    REAPER.forget(pgid)


class PrepareFailed(RuntimeError):
    """The ``prepare`` command of a fresh folder did not start, end in time or succeed."""


async def prepare_folder(folder: str, prepare: tuple[str, ...], seconds: float, stderr: StderrTail) -> None:
    """Run `prepare` (nothing when empty) in `folder`, in a process group of its own that is killed whole
    after `seconds`; the end of its stderr goes to `stderr`. `PrepareFailed` says why it failed."""
    if not prepare:
        return
    try:
        proc = await asyncio.create_subprocess_exec(
            *prepare, cwd=folder, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
    except OSError as e:
        raise PrepareFailed(f"the prepare command did not start: {type(e).__name__}: {e}") from None
    try:
        code, _ = await asyncio.wait_for(asyncio.gather(proc.wait(), drain(proc.stderr, stderr)), seconds)
    except asyncio.TimeoutError:
        signal_group(proc.pid, signal.SIGKILL)
        raise PrepareFailed(f"the prepare command did not end within {seconds:g} s") from None
    finally:
        signal_group(proc.pid, signal.SIGKILL)  # what it left running in its group
    if code != 0:
        raise PrepareFailed(f"the prepare command exited with status {code}")


@asynccontextmanager
async def stdio_transport(server: McpServer, wire: Wire, stderr: StderrTail,
                          cwd: str = "") -> AsyncIterator[tuple[Any, Any]]:
    """Start `server` (a command) in `cwd` (default: its own ``cwd``) and yield the SDK session's read
    and write streams (module docstring); the end of its stderr goes to `stderr`. OSError when the
    command cannot be started."""
    import anyio  # deferred: comes with mcp
    from mcp import types as mcp_types  # deferred: mcp is optional
    from mcp.client.stdio import get_default_environment  # deferred: mcp is optional
    from mcp.shared.message import SessionMessage  # deferred: mcp is optional

    read_fd, write_fd = os.pipe()
    _enlarge(read_fd)
    try:
        proc = await asyncio.create_subprocess_exec(
            *server.command, stdin=asyncio.subprocess.PIPE, stdout=write_fd,
            stderr=asyncio.subprocess.PIPE,
            env=get_default_environment() | dict(server.env), cwd=cwd or server.cwd or None,
            start_new_session=True, preexec_fn=_child_setup())
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    pgid = proc.pid
    REAPER.register(pgid)
    background = [asyncio.ensure_future(drain(proc.stderr, stderr))]
    stdout = asyncio.StreamReader()  # buffers about twice its 64 KiB limit before it pauses the pipe
    pipe: Any = None
    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[Any](0)

    async def deliver(message: Any) -> bool:
        """Pass one message on; False when the session must end (a protocol violation)."""
        out = wire.received(message)
        if out is not None:
            try:
                parsed = mcp_types.jsonrpc_message_adapter.validate_json(out, by_name=False)
            except ValueError:
                wire.violation(out)
                return False
            await to_session.send(SessionMessage(parsed))
        return not wire.problem

    async def read() -> None:
        cutter = MessageCutter(wire.cap)
        try:
            async with to_session:
                while data := await stdout.read(CHUNK_BYTES):
                    for message in cutter.feed(data):
                        if not await deliver(message):
                            return
                rest = cutter.finish()
                if rest is not None:
                    await deliver(rest)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass

    async def write() -> None:
        assert proc.stdin is not None
        try:
            async with from_session:
                async for item in from_session:
                    wire.sent(item.message)
                    text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    proc.stdin.write(text.encode() + b"\n")
                    await proc.stdin.drain()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError, OSError):
            await to_session.aclose()

    try:
        pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stdout), os.fdopen(read_fd, "rb", 0))
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(write)
            try:
                yield read_stream, write_stream
            finally:
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            # stdout is still read (and dropped) while the server exits: one blocked writing it could not
            background.append(asyncio.ensure_future(drain(stdout, StderrTail())))
            await stop_process(proc, pgid)
            for task in background:
                task.cancel()
            if pipe is not None:
                pipe.close()
            for stream in (read_stream, write_stream, to_session, from_session):
                await stream.aclose()
