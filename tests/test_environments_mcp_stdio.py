"""MCP servers that misbehave on purpose (tests/mcp_hostile_server.py) over stdio and streamable HTTP:
results far over the cap end in a cut result that notes the full size and the server stays usable;
text that is not MCP is a one-line error with the server's first bytes; bad tools are left out and the
rest work; a server and the helper it starts end on every exit path of tooltune (close, an error, SIGTERM,
SIGKILL); a fresh working folder resets a server that keeps its state in files."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp")
psutil = pytest.importorskip("psutil")

from test_environments_mcp_environment import wait_for  # noqa: E402

from tooltune.data.mcp_tasks import task_from_record  # noqa: E402
from tooltune.environments.mcp import McpEnvironment, McpSettings  # noqa: E402
from tooltune.environments.mcp import schema as mcp_schema  # noqa: E402
from tooltune.environments.mcp.client import McpConnection, McpUnavailable, close_all  # noqa: E402
from tooltune.environments.mcp.data import McpServer  # noqa: E402
from tooltune.generation import (  # noqa: E402
    EpisodeConfig,
    EpisodeRun,
    MessageContext,
    ScriptedBackend,
    StopRules,
    drive,
    step_decoder,
)
from tooltune.prompts import render_answer  # noqa: E402
from tooltune.schema import ToolCall  # noqa: E402

HOSTILE = [sys.executable, str(Path(__file__).with_name("mcp_hostile_server.py"))]
CAP = 1 << 20


def hostile(mode: str) -> McpServer:
    return McpServer.parse([*HOSTILE, "--mode", mode])


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(autouse=True)
def closed() -> Iterator[None]:
    yield
    close_all()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_big(flags: list[str], mode: str = "big") -> Iterator[str]:
    """The hostile server over HTTP: JSON bodies with Content-Length (not read past the cap), without
    (``--unsized``: read to their end) or SSE events (``--sse``)."""
    port = free_port()
    proc = subprocess.Popen([*HOSTILE, "--mode", mode, "--http", str(port), *flags])
    try:
        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        assert wait_for(listening, 30)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.parametrize("transport", ["stdio", "http", "http-unsized", "http-sse"])
def test_results_far_over_the_cap_end_cut_with_their_size_and_the_server_goes_on(transport: str):
    """The figure: a 20 MB and a 60 MB result through a 1 MB cap arrive as cut results of at most
    64 KB of text whose note gives the full size; the next call is answered as usual."""
    flags = {"http-unsized": ["--unsized"], "http-sse": ["--sse"]}.get(transport, [])
    with ExitStack() as stack:
        where = stack.enter_context(http_big(flags)) if transport != "stdio" else None
        check_big_results(McpServer.parse(where) if where else hostile("big"))


def check_big_results(server: McpServer) -> None:
    conn = McpConnection(server, start_seconds=20, call_seconds=20, message_bytes=CAP).start()
    try:
        small = conn.call("dump", {"size": 1000})
        assert small.text == "x" * 1000 and small.cut_bytes == 0
        for size in (20_000_000, 60_000_000):
            cut = conn.call("dump", {"size": size})
            assert not cut.error and size < cut.cut_bytes < size + 200
            assert 0 < len(cut.text) <= 64 * 1024 and set(cut.text) == {"x"}
        assert conn.call("echo", {"text": "still here"}).text == "still here"
    finally:
        conn.close()


@pytest.mark.parametrize("transport", ["stdio", "http-unsized", "http-sse"])
def test_a_result_far_over_the_cap_costs_less_than_twice_the_cap_end_to_end(transport: str):
    """The figure: traced peak memory of this process while a 30 MB result passes a 2 MiB cap (read to
    its end: stdio, HTTP without a length, SSE) stays below 4 MiB."""
    import tracemalloc

    cap = 2 << 20
    flags = {"http-unsized": ["--unsized"], "http-sse": ["--sse"]}.get(transport, [])
    with ExitStack() as stack:
        where = stack.enter_context(http_big(flags)) if transport != "stdio" else None
        conn = McpConnection(McpServer.parse(where) if where else hostile("big"), start_seconds=20,
                             call_seconds=20, message_bytes=cap).start()
        stack.callback(conn.close)
        conn.call("dump", {"size": 10})
        tracemalloc.start()
        try:
            cut = conn.call("dump", {"size": 30_000_000})
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert cut.cut_bytes > 30_000_000 and peak < 2 * cap, peak


def test_the_tool_message_of_a_cut_result_notes_the_full_size():
    server = hostile("big")
    conn = McpConnection(server).start()
    tools = conn.list_tools()
    conn.close()
    record = {"id": "big", "prompt": "dump", "reset": "none", "check": {"kind": "answer", "contains": ["x"]}}
    env = McpEnvironment(McpSettings(message_bytes=CAP, result_chars=200))
    env.reset(task_from_record(record, server, tools))
    try:
        out = env.step(ToolCall("dump", {"size": 5_000_000}))
        assert not out.error and len(out.content) == 200
        assert out.content.endswith(" bytes in all]") and "5000" in out.content
    finally:
        env.close()


@pytest.mark.parametrize("transport, first_bytes", [
    ("stdio", "b'Welcome! Server starting on stdio"), ("http", "b'<html>Welcome! This is not an MCP")])
def test_a_server_that_speaks_no_protocol_is_one_line_with_its_first_bytes(
        transport: str, first_bytes: str, caplog: pytest.LogCaptureFixture):
    with ExitStack() as stack:
        where = stack.enter_context(http_big([], "junk")) if transport == "http" else None
        conn = McpConnection(McpServer.parse(where) if where else hostile("junk"), start_seconds=20).start()
        with caplog.at_level(logging.WARNING), pytest.raises(McpUnavailable) as err:
            conn.list_tools()
    message = str(err.value)
    assert f"not an MCP (JSON-RPC) message: {first_bytes}" in message
    assert "\n" not in message and HOSTILE[1] not in message and sys.executable not in message  # no folders
    assert "no MCP handshake within" not in message  # it failed on the first line, not on the deadline
    assert all("Traceback" not in r.getMessage() and not r.exc_info for r in caplog.records)


def test_bad_tools_are_left_out_and_the_rest_of_the_server_works(caplog: pytest.LogCaptureFixture):
    mcp_schema._WARNED.clear()
    conn = McpConnection(hostile("badtools"), start_seconds=20).start()
    try:
        with caplog.at_level(logging.WARNING):
            names = [t.name for t in conn.list_tools()]
        assert names == ["echo"] and conn.call("echo", {"text": "ok"}).text == "ok"
    finally:
        conn.close()
    lines = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(lines) == 5 and all("\n" not in line for line in lines)
    for tool in ("dangling", "not_object", "deep", "backtracking", "string_schema"):
        assert any(f"tool {tool!r} left out" in line for line in lines), tool


def test_a_server_that_floods_stderr_costs_no_memory_and_its_last_words_are_the_reason():
    """The figure: 20 MB on stderr, of which the connection keeps the last 4 KB (nothing on disk)."""
    conn = McpConnection(hostile("noisy"), start_seconds=20).start()
    try:
        assert conn.call("echo", {"text": "ok"}).text == "ok"
        assert wait_for(lambda: len(conn.stderr.data) == 4096)
        with pytest.raises(McpUnavailable) as err:
            conn.call("crash", {})
        assert "closed" in str(err.value) and "fatal" not in str(err.value)  # the model reads no stderr
        assert conn.broken.endswith("fatal: the tool crashed')")  # the logs do
    finally:
        conn.close()


def test_the_calls_of_mcp_episodes_run_side_by_side_within_the_server_limit():
    """The figure: 6 episodes, one 0.5 s call each, at most 3 at once per server: the server's own clock
    shows 3 calls overlapping and never 4 (the bench: 8 x 2 s calls in 2.0 s instead of 16 s)."""
    server = hostile("slow")
    conn = McpConnection(server).start()
    tools = conn.list_tools()
    conn.close()
    sample = task_from_record({"id": "w", "prompt": "wait", "check": {"kind": "answer", "contains": ["x"]}},
                              server, tools)
    text = render_answer([ToolCall("wait", {"seconds": 0.5})], "tool_n1")
    runs = []
    for k in range(6):
        env = McpEnvironment(McpSettings(server_calls=3))
        env.reset(sample)
        assert not env.step(ToolCall("echo", {"text": "started"})).error
        runs.append(EpisodeRun(env, MessageContext(EpisodeConfig(), f"e{k}"), rules=StopRules(step_limit=1),
                               decode=step_decoder("tool_n1"), id=f"e{k}"))
    drive(runs, ScriptedBackend(lambda r: text))
    spans = [json.loads(r.record.turn_steps[0][0].results[0].content) for r in runs]
    for r in runs:
        r.executor.close()
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = most = 0
    for _, d in edges:
        now += d
        most = max(most, now)
    assert 1 < most <= 3


EXIT_SCRIPT = """
import json, sys, threading
import psutil
from tooltune.environments.mcp.client import McpConnection
from tooltune.environments.mcp.data import McpServer
path = sys.argv[1]
conn = McpConnection(McpServer.parse({hostile!r} + ["--mode", "helper"])).start()
conn.call("echo", {{"text": "hi"}})
server = [p for p in psutil.Process().children() if "mcp_hostile_server" in " ".join(p.cmdline())][0]
helper = [p.pid for p in server.children()]
print(json.dumps([server.pid] + helper), flush=True)
if path == "close":
    conn.close()
elif path == "error":
    raise RuntimeError("tooltune failed")
else:
    conn.call("block", {{}}, seconds=600)
"""


@pytest.mark.parametrize("path", ["close", "error", "sigterm", "sigkill"])
def test_no_server_or_helper_process_outlives_tooltune(path: str, tmp_path: Path):
    """The figure: processes left of the server and its helper after each exit path: 0."""
    script = tmp_path / "run.py"
    script.write_text(EXIT_SCRIPT.format(hostile=HOSTILE))
    proc = subprocess.Popen([sys.executable, str(script), path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pids = json.loads(proc.stdout.readline() or "[]")
        assert len(pids) == 2, proc.stderr.read() if proc.stderr else ""
        if path in ("sigterm", "sigkill"):
            time.sleep(0.3)  # the blocking call is in flight
            proc.send_signal(signal.SIGTERM if path == "sigterm" else signal.SIGKILL)
        proc.wait(60)
        assert wait_for(lambda: not any(map(alive, pids)), 20), [p for p in pids if alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in pids if "pids" in locals() else []:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_fresh_dir_reset_gives_each_episode_an_empty_folder_prepared_by_its_command(tmp_path: Path):
    """A server whose state is a file in its working folder: the prepare command writes the file, the
    episode changes it, and the next episode starts from the prepared file again."""
    server = McpServer.parse([sys.executable, "-c", FILE_SERVER])
    conn = McpConnection(server, fresh_dir=True, prepare=(sys.executable, "-c", PREPARE)).start()
    tools = conn.list_tools()
    assert conn.call("read", {}).text == "prepared" and os.path.isdir(conn.workdir)
    first_dir = conn.workdir
    conn.close()
    assert not os.path.exists(first_dir)
    record = {"id": "f", "prompt": "append", "reset": "fresh_dir", "prepare": [sys.executable, "-c", PREPARE],
              "check": {"kind": "result", "call": {"name": "read", "arguments": {}}, "equals": "prepared+"}}
    sample = task_from_record(record, server, tools)
    for _ in range(2):  # the second episode sees the prepared file, not the first one's change
        env = McpEnvironment()
        env.reset(sample)
        assert not env.step(ToolCall("append", {})).error
        assert env.outcome().success
    exits_4 = (sys.executable, "-c", "raise SystemExit(4)")
    failing = McpConnection(server, fresh_dir=True, prepare=exits_4).start()
    with pytest.raises(McpUnavailable, match="the prepare command exited with status 4"):
        failing.list_tools()
    failing.close()
    assert not os.path.exists(failing.workdir)


PREPARE = "open('state.txt', 'w').write('prepared')"
FILE_SERVER = r"""
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if "id" not in req:
        continue
    m, out = req["method"], None
    if m == "server/discover":
        out = {"capabilities": {"tools": {}}, "supportedVersions": ["2026-07-28"], "resultType": "complete",
               "cacheScope": "private", "ttlMs": 0}
    elif m == "tools/list":
        out = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("read", "append")],
               "resultType": "complete", "cacheScope": "private", "ttlMs": 0}
    else:
        if req["params"]["name"] == "append":
            open("state.txt", "a").write("+")
        out = {"content": [{"type": "text", "text": open("state.txt").read()}], "isError": False,
               "resultType": "complete"}
    print(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": out}), flush=True)
"""
