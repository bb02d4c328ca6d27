"""Hostile MCP servers: bounded results, calls side by side, no orphan processes, one-line errors.

Every server is tests/mcp_hostile_server.py (standard library only; it misbehaves on purpose).

1. Results far over the cap: one tools/call answer of 50 MB and of 400 MB, over stdio and over
   streamable HTTP (127.0.0.1; JSON bodies with and without Content-Length, SSE), each in a fresh
   process: the call's time, the peak resident memory above the process's resident memory before the
   call (Linux: VmHWM after resetting it through /proc/self/clear_refs), and the traced Python peak
   (tracemalloc) of a second call. The cap is the
   default `message_bytes` (4 MiB). Side by side, the SDK's own stdio reader on 5/10/20 MB (it
   re-joins its buffer for every piece read).
2. Calls side by side: 8 `mcp` episodes whose one call takes 2 s, one turn driven by `drive` with the
   default tool threads and with one (the calls one after another).
3. Processes left: a server that starts a helper child, tooltune ended by close, by an error, by
   SIGTERM and by SIGKILL during a blocking call; processes of the server and helper left afterwards.
4. One-line errors: the time to the error of a server that writes a banner on stdout, and to the tool
   list of a server with five bad tools (left out).

Run: python bench/mcp_limits.py [--skip-sdk]   (or `tooltune bench mcp_limits ...`)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HOSTILE = [sys.executable, str(ROOT / "tests" / "mcp_hostile_server.py")]
MB = 1_000_000

RESULT_CHILD = """
import json, sys, time, tracemalloc
from tooltune.environments.mcp.client import McpConnection
from tooltune.environments.mcp.data import McpServer

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    return 0

server, size = json.loads(sys.argv[1]), int(sys.argv[2])
conn = McpConnection(McpServer.parse(server), start_seconds=60, call_seconds=120).start()
conn.call("dump", {"size": 1000})
base = status("VmRSS:")
try:
    open("/proc/self/clear_refs", "w").write("5")
except OSError:
    pass
t0 = time.perf_counter()
r = conn.call("dump", {"size": size})
seconds = time.perf_counter() - t0
peak = status("VmHWM:") - base
tracemalloc.start()
conn.call("dump", {"size": size})
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"seconds": seconds, "rss_extra": peak, "traced_peak": traced, "cut_bytes": r.cut_bytes,
                  "text_chars": len(r.text), "cap": conn.wire.cap}))
conn.close()
"""

SDK_CHILD = """
import asyncio, json, sys, time
from mcp import Client, StdioServerParameters

async def main(argv, size):
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with Client(params, read_timeout_seconds=120) as client:
        t0 = time.perf_counter()
        await client.call_tool("dump", {"size": size})
        return time.perf_counter() - t0

print(asyncio.run(main(json.loads(sys.argv[1]), int(sys.argv[2]))))
"""


def _child(script: str, *args: str, timeout: float = 300) -> str:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return out.stdout.strip().splitlines()[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def results(skip_sdk: bool) -> None:
    print("1. results far over the cap (one tools/call answer)")
    stdio = [*HOSTILE, "--mode", "big"]
    kinds = {"http": [], "http, no Content-Length": ["--unsized"], "http, SSE": ["--sse"]}
    ports = {name: _free_port() for name in kinds}
    http = [subprocess.Popen([*HOSTILE, "--mode", "big", "--http", str(ports[name]), *flags])
            for name, flags in kinds.items()]
    try:
        servers: list[tuple[str, object]] = [("stdio", stdio)]
        for name, port in ports.items():
            _wait_listening(port)
            servers.append((name, f"http://127.0.0.1:{port}/mcp"))
        for name, server in servers:
            for size in (50 * MB, 400 * MB):
                r = json.loads(_child(RESULT_CHILD, json.dumps(server), str(size)))
                print(f"   {name}, {size // MB} MB: {r['seconds']:.2f} s,"
                      f" peak RSS +{r['rss_extra'] / 2**20:.1f} MiB,"
                      f" traced peak {r['traced_peak'] / 2**20:.1f} MiB (cap {r['cap'] / 2**20:.0f} MiB);"
                      f" cut result of {r['text_chars']} characters noting {r['cut_bytes']} bytes")
    finally:
        for proc in http:
            proc.terminate()
            proc.wait(20)
    if skip_sdk:
        return
    for size in (5 * MB, 10 * MB, 20 * MB):
        seconds = float(_child(SDK_CHILD, json.dumps(stdio), str(size)))
        ours = json.loads(_child(RESULT_CHILD, json.dumps(stdio), str(size)))["seconds"]
        print(f"   stdio {size // MB:4d} MB: the SDK's reader {seconds:.2f} s, tooltune's {ours:.3f} s")


def side_by_side() -> None:
    from tooltune.data.mcp_tasks import task_from_record
    from tooltune.environments.mcp import McpEnvironment
    from tooltune.environments.mcp.client import McpConnection, close_all
    from tooltune.environments.mcp.data import McpServer
    from tooltune.generation import (
        EpisodeConfig,
        EpisodeRun,
        MessageContext,
        ScriptedBackend,
        StopRules,
        drive,
        step_decoder,
    )
    from tooltune.prompts import render_answer
    from tooltune.schema import ToolCall

    print("2. 8 episodes whose call takes 2 s: one turn")
    server = McpServer.parse([*HOSTILE, "--mode", "slow"])
    conn = McpConnection(server).start()
    tools = conn.list_tools()
    conn.close()
    record = {"id": "slow", "prompt": "wait", "check": {"kind": "answer", "contains": ["done"]}}
    sample = task_from_record(record, server, tools)
    text = render_answer([ToolCall("wait", {"seconds": 2})], "tool_n1")
    for threads in (32, 1):
        runs = []
        for k in range(8):
            env = McpEnvironment()
            env.reset(sample)
            env.step(ToolCall("echo", {"text": "warm"}))  # started and listed before the clock runs
            runs.append(EpisodeRun(env, MessageContext(EpisodeConfig(), f"e{k}"),
                                   rules=StopRules(step_limit=1), decode=step_decoder("tool_n1"), id=f"e{k}"))
        backend = ScriptedBackend(lambda r: text)
        t0 = time.perf_counter()
        drive(runs, backend, tool_threads=threads)
        seconds = time.perf_counter() - t0
        ok = sum(not s.error for r in runs for s in r.record.turn_steps[0][0].results)
        print(f"   tool threads {threads:2d}: {seconds:.2f} s for 8 x 2 s calls ({ok} answered)")
        for r in runs:
            r.executor.close()
    close_all()


EXIT_CHILD = """
import json, sys
import psutil
from tooltune.environments.mcp.client import McpConnection
from tooltune.environments.mcp.data import McpServer
path = sys.argv[2]
conn = McpConnection(McpServer.parse(json.loads(sys.argv[1]))).start()
conn.call("echo", {"text": "hi"})
server = [p for p in psutil.Process().children() if "mcp_hostile_server" in " ".join(p.cmdline())][0]
print(json.dumps([server.pid] + [p.pid for p in server.children()]), flush=True)
if path == "close":
    conn.close()
elif path == "error":
    raise RuntimeError("tooltune failed")
else:
    conn.call("block", {}, seconds=600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def processes() -> None:
    print("3. processes of a server and its helper left after each exit path of tooltune")
    for path in ("close", "error", "sigterm", "sigkill"):
        argv = [sys.executable, "-c", EXIT_CHILD, json.dumps([*HOSTILE, "--mode", "helper"]), path]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        assert proc.stdout is not None
        pids = json.loads(proc.stdout.readline())
        if path.startswith("sig"):
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM if path == "sigterm" else signal.SIGKILL)
        proc.wait(60)
        t0 = time.perf_counter()
        while any(map(_alive, pids)) and time.perf_counter() - t0 < 20:
            time.sleep(0.02)
        left = [p for p in pids if _alive(p)]
        print(f"   {path:8}: {len(pids)} processes (server + helper), {len(left)} left "
              f"({time.perf_counter() - t0:.2f} s after tooltune ended)")
        for pid in left:
            os.kill(pid, signal.SIGKILL)


def errors() -> None:
    import logging

    from tooltune.environments.mcp.client import McpConnection, McpUnavailable
    from tooltune.environments.mcp.data import McpServer

    print("4. one-line errors")
    logging.disable(logging.WARNING)
    conn = McpConnection(McpServer.parse([*HOSTILE, "--mode", "junk"])).start()
    t0 = time.perf_counter()
    try:
        conn.list_tools()
    except McpUnavailable as e:
        print(f"   banner on stdout: {time.perf_counter() - t0:.2f} s to: {e}")
    conn = McpConnection(McpServer.parse([*HOSTILE, "--mode", "badtools"])).start()
    t0 = time.perf_counter()
    names = [t.name for t in conn.list_tools()]
    print(f"   five bad tools: listed in {time.perf_counter() - t0:.2f} s, kept {names}")
    conn.close()
    logging.disable(logging.NOTSET)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-sdk", action="store_true", help="do not time the SDK's own stdio reader")
    args = parser.parse_args()
    os.chdir(tempfile.gettempdir())
    results(args.skip_sdk)
    side_by_side()
    processes()
    errors()


if __name__ == "__main__":
    main()
