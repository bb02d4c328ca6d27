"""Servers tooltune does not control: an endpoint that fails, and MCP servers written with the official SDK.

1. Evaluation against an OpenAI-compatible server on 127.0.0.1 (tests/test_generation_endpoint.py's
   `FlakyServer`) that answers BFCL's ground truth: `tooltune eval bfcl` on `--subset` entries of
   simple_python, greedy, one seed, `--retries 6 --timeout 1`:
   - a clean server (the reference verdicts);
   - a server that fails about one request in four once (429 with Retry-After, 500, a reply slower
     than the timeout, a body that is not JSON, a dropped connection) and one entry on every attempt:
     exit status, verdicts kept, verdicts equal to the clean run's but for that entry, wall time;
   - the same killed (SIGKILL) after 20 verdicts, then `--resume`: verdicts equal, each entry once;
   - `--resume` again: requests sent (the failed entry is kept), and `--max-failed 0`: exit status.
2. MCP servers: tests/mcp_sdk_server.py (`MCPServer`, typed tools with output schemas) answering 50 MB
   over stdio and streamable HTTP, then the next call; tests/mcp_hostile_server.py listing a schema
   nested 10,000 levels, and a tool list that pages for ever; the SDK server's tool whose patterns are
   in JSON Schema's dialect.

Each part runs tooltune in child processes from `--tooltune DIR` (default: this checkout), so an older
checkout can be measured the same way (the servers always come from this one).

Run: python bench/served_limits.py [--subset 50] [--tooltune DIR]   (or `tooltune bench served_limits`)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

KINDS = ["429", "500", "slow", "badjson", "drop"]

MCP_CHILD = """
import json, sys, time, logging
logging.basicConfig(level=logging.WARNING, format="%(message)s")
from tooltune.environments.mcp.client import McpConnection
from tooltune.environments.mcp.data import McpServer
server, case = json.loads(sys.argv[1]), sys.argv[2]
conn = McpConnection(McpServer.parse(server), start_seconds=60, call_seconds=60).start()
out = {}
t0 = time.perf_counter()
try:
    out["tools"] = sorted(t.name for t in conn.list_tools())
    out["list_s"] = round(time.perf_counter() - t0, 2)
    out["list_cut"] = getattr(conn, "list_cut", None)
    if case == "big":
        t0 = time.perf_counter()
        got = conn.call("blob", {"size": 50_000_000})
        out.update(call_s=round(time.perf_counter() - t0, 2), cut_bytes=got.cut_bytes, chars=len(got.text))
    out["next"] = conn.call("echo", {"text": "still here"}).text
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"[:300]
finally:
    out["broken"] = conn.broken[:300]
    conn.close()
print(json.dumps(out))
"""


def _eval(tree: Path, url: str, out: Path, subset: int, *extra: str, kill_after: int = 0) -> dict:
    """One `tooltune eval bfcl` in a child process; its exit status, wall time and verdicts."""
    cmd = [sys.executable, "-m", "tooltune.cli", "eval", "bfcl", "--endpoint", url, "--model-name", "m",
           "--categories", "simple_python", "--subset", str(subset), "--seeds", "1", "--temperature", "0",
           "--retries", "6", "--timeout", "1", "--no-report", "--out", str(out), *extra]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tempfile.gettempdir(), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if kill_after:
        path = out / "verdicts.jsonl"
        while proc.poll() is None:
            if path.exists() and len(path.read_text().splitlines()) >= kill_after:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
    stdout, stderr = proc.communicate()
    path = out / "verdicts.jsonl"
    verdicts = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    last = [line for line in stderr.splitlines() if line.strip()][-1:] or [""]
    return {"rc": proc.returncode, "s": round(time.perf_counter() - t0, 1), "verdicts": verdicts,
            "last_line": last[0][:300]}


def endpoint_part(tree: Path, subset: int) -> None:
    from test_generation_endpoint import FlakyServer

    from tooltune.evaluation.controls import Controls
    from tooltune.evaluation.runner import prepare_subset
    from tooltune.evaluation.scripted import ground_truth_policy
    from tooltune.evaluation.subset import SubsetSpec
    from tooltune.generation import GenerationRequest

    prep, _ = prepare_subset("bfcl", "simple_python", Controls(), subset=SubsetSpec(subset))
    policy = ground_truth_policy("bfcl", categories="simple_python", controls=Controls())
    answers = {t.messages[-1]["content"]: policy(GenerationRequest(t.messages, id=t.id)) for t in prep.tasks}
    doomed = prep.tasks[len(prep.tasks) // 2]
    doomed_text = doomed.messages[-1]["content"]

    def flaky(text: str, attempt: int) -> str:
        if text == doomed_text:
            return "500"
        h = zlib.crc32(text.encode())
        return KINDS[(h // 4) % len(KINDS)] if h % 4 == 0 and attempt == 1 else "ok"

    def answering(server: FlakyServer) -> FlakyServer:
        handler = server.httpd.RequestHandlerClass
        send = handler._send

        def _send(self, status, data, headers=None):  # the ground truth in place of the echo
            if status == 200 and data.startswith(b'{"choices"'):
                text = json.loads(data)["choices"][0]["message"]["content"].removeprefix("answer:")
                data = json.dumps({"choices": [{"index": 0, "message": {
                    "role": "assistant", "content": answers.get(text, "")}}]}).encode()
            send(self, status, data, headers)

        handler._send = _send
        return server

    work = Path(tempfile.mkdtemp(prefix="served-"))
    with answering(FlakyServer()) as clean:
        ref = _eval(tree, clean.url, work / "clean", subset)
    truth = {v["id"]: v["valid"] for v in ref["verdicts"]}
    print(f"clean server: exit {ref['rc']}, {len(truth)} verdicts, {sum(truth.values())} valid, {ref['s']} s")
    with answering(FlakyServer(flaky)) as server:
        run = _eval(tree, server.url, work / "flaky", subset)
        got = {v["id"]: v["valid"] for v in run["verdicts"]}
        same = sum(got.get(i) == ok for i, ok in truth.items() if i != doomed.id)
        failed = [v["id"] for v in run["verdicts"] if v.get("generation_failed")]
        print(f"1 in 4 failing once + {doomed.id} always 500: exit {run['rc']}, {len(got)} verdicts kept, "
              f"{same}/{len(truth) - 1} others equal to the clean run, failed {failed}, {run['s']} s, "
              f"{len(server.times)} requests; last line: {run['last_line']}")
        killed = _eval(tree, server.url, work / "killed", subset, kill_after=20)
        resumed = _eval(tree, server.url, work / "killed", subset, "--resume")
        rv = resumed["verdicts"]
        got = {v["id"]: v["valid"] for v in rv}
        same = sum(got.get(i) == ok for i, ok in truth.items() if i != doomed.id)
        print(f"SIGKILL after {len(killed['verdicts'])} verdicts (exit {killed['rc']}), --resume: exit "
              f"{resumed['rc']}, {len(rv)} verdicts for {len({v['id'] for v in rv})} entries, {same}/"
              f"{len(truth) - 1} others equal to the clean run")
        before = len(server.times)
        again = _eval(tree, server.url, work / "flaky", subset, "--resume")
        print(f"--resume of the finished run: exit {again['rc']}, {len(server.times) - before} requests sent")
        stop = _eval(tree, server.url, work / "stop", subset, "--max-failed", "0")
        print(f"--max-failed 0: exit {stop['rc']}, {len(stop['verdicts'])} verdicts kept; "
              f"{stop['last_line']}")


def _mcp(tree: Path, server: object, case: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", MCP_CHILD, json.dumps(server), case], env=env,
                         cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=600)
    lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
    got = json.loads(lines[-1]) if lines else {"error": out.stderr[-300:]}
    warned = [x for x in out.stderr.splitlines() if "left out" in x or "cut after" in x or "ignored" in x]
    got["warnings"] = [w[:200] for w in warned]
    return got


def mcp_part(tree: Path) -> None:
    from test_environments_mcp_stdio import free_port

    sdk = [sys.executable, str(ROOT / "tests" / "mcp_sdk_server.py")]
    hostile = [sys.executable, str(ROOT / "tests" / "mcp_hostile_server.py")]
    print("SDK server, 50 MB answer, stdio:", _mcp(tree, sdk, "big"))
    port = free_port()
    proc = subprocess.Popen([*sdk, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(4)
        print("SDK server, 50 MB answer, HTTP:", _mcp(tree, f"http://127.0.0.1:{port}/mcp", "big"))
    finally:
        proc.terminate()
        proc.wait(20)
    print("schema nested 10,000 levels, stdio:", _mcp(tree, [*hostile, "--mode", "deep"], "list"))
    print("tool list paging for ever, stdio:", _mcp(tree, [*hostile, "--mode", "paging"], "list"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subset", type=int, default=50, help="simple_python entries evaluated")
    parser.add_argument("--tooltune", default=str(ROOT), help="checkout whose tooltune is measured")
    parser.add_argument("--skip-endpoint", action="store_true")
    parser.add_argument("--skip-mcp", action="store_true")
    args = parser.parse_args()
    tree = Path(args.tooltune).resolve()
    if not args.skip_endpoint:
        endpoint_part(tree, args.subset)
    if not args.skip_mcp:
        mcp_part(tree)


if __name__ == "__main__":
    main()
