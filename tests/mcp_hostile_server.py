"""An MCP server that misbehaves on purpose, for the tests and bench/mcp_limits.py (standard library only).

It speaks MCP's JSON-RPC by hand, over stdio or (``--http PORT``) streamable HTTP on 127.0.0.1 with one
JSON body per POST. ``--mode`` picks the misbehaviour:

- ``big``: tool ``dump(size)`` answers with a text of ``size`` bytes (written in 1 MB pieces);
- ``junk``: writes a line that is not MCP on stdout before anything else (over HTTP: answers with
  an HTML body);
- ``helper``: starts a helper process (``sleep``) that outlives it, prints its pid to stderr, and
  exits when its stdin closes; tool ``block`` never answers;
- ``badtools``: lists ``echo`` and five tools with bad input schemas (dangling ``$ref``, non-object
  schema, nested 100 deep, a backtracking ``pattern``, a schema that is a string);
- ``slow``: tool ``wait(seconds)`` answers after sleeping, with the wall-clock times it started and
  ended;
- ``noisy``: writes 20 MB to stderr before it serves; tool ``crash`` writes a last line to stderr
  and exits;
- ``deep``: lists ``echo`` and ``deep``, whose input schema nests 10,000 properties (20,001 JSON
  levels; written without recursion);
- ``paging``: every tools/list page holds ``echo`` and ``page`` and names a next cursor, for ever.

Over HTTP a JSON body carries Content-Length unless ``--unsized``; ``--sse`` answers with an SSE event.

Every mode has ``echo(text)``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO

PIECE = b"x" * (1 << 20)
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}}


def _one(name: str, kind: str) -> dict[str, Any]:
    """An object schema with one property `name` of JSON type `kind`."""
    return {"type": "object", "properties": {name: {"type": kind}}}


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


DEEP_LEVELS = 10_000


def deep_schema_json(levels: int) -> str:
    """The JSON text of `_deep(levels)`, built as text (json.dumps would recurse once per level)."""
    return '{"type": "object", "properties": {"a": ' * levels + '{"type": "object"}' + "}}" * levels


def tools(mode: str) -> list[dict[str, Any]]:
    out = [{"name": "echo", "description": "Echo the text.", "inputSchema": TEXT}]
    if mode == "big":
        out.append({"name": "dump", "inputSchema": _one("size", "integer")})
    if mode == "helper":
        out.append({"name": "block", "inputSchema": {"type": "object"}})
    if mode == "noisy":
        out.append({"name": "crash", "inputSchema": {"type": "object"}})
    if mode == "slow":
        out.append({"name": "wait", "inputSchema": _one("seconds", "number")})
    if mode == "badtools":
        out += [
            {"name": "dangling", "inputSchema": {"type": "object",
                                                 "properties": {"a": {"$ref": "#/$defs/gone"}}}},
            {"name": "not_object", "inputSchema": {"type": "array", "items": {"type": "string"}}},
            {"name": "deep", "inputSchema": _deep(100)},
            {"name": "backtracking", "inputSchema": {"type": "object", "properties": {
                "code": {"type": "string", "pattern": "^(a+)+$"}}}},
            {"name": "string_schema", "inputSchema": "object"},
        ]
    return out


def answer(request: dict[str, Any], mode: str, out: BinaryIO, on_length: Any = None) -> None:
    """Write the response to `request` (nothing for a notification); `on_length(n)` is told the size of
    a dump before it is written (the HTTP server's Content-Length)."""
    ident, method = request.get("id"), request.get("method")
    if ident is None:
        return
    head = json.dumps({"jsonrpc": "2.0", "id": ident})[:-1].encode()
    if method in ("server/discover", "initialize"):
        result: Any = {"capabilities": {"tools": {}}, "supportedVersions": ["2026-07-28"],
                       "protocolVersion": "2026-07-28", "resultType": "complete",
                       "cacheScope": "private", "ttlMs": 0,
                       "serverInfo": {"name": "hostile", "version": "0"},
                       "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "hostile", "version": "0"}}}
    elif method == "tools/list" and mode == "deep":
        listed = ('{"tools": [' + json.dumps(tools(mode)[0]) + ', {"name": "deep", "inputSchema": '
                  + deep_schema_json(DEEP_LEVELS) + '}], "resultType": "complete", "cacheScope": "private", '
                  '"ttlMs": 0}')
        body = head + b',"result":' + listed.encode() + b"}\n"
        if on_length is not None:
            on_length(len(body))
        out.write(body)
        out.flush()
        return
    elif method == "tools/list":
        result = {"tools": tools(mode), "resultType": "complete", "cacheScope": "private", "ttlMs": 0}
        if mode == "paging":
            page = int((request.get("params") or {}).get("cursor") or 0)
            result["tools"].append({"name": "page", "inputSchema": {"type": "object"}})
            result["nextCursor"] = str(page + 1)
    elif method == "tools/call":
        name = request["params"]["name"]
        args = request["params"].get("arguments") or {}
        if name == "dump":
            size = int(args.get("size", 0))
            start, end = head + b',"result":{"content":[{"type":"text","text":"', \
                b'"}],"isError":false,"resultType":"complete"}}\n'
            if on_length is not None:
                on_length(len(start) + size + len(end))
            out.write(start)
            for at in range(0, size, len(PIECE)):
                out.write(PIECE[: min(len(PIECE), size - at)])
            out.write(end)
            out.flush()
            return
        if name == "block":
            time.sleep(3600)
        if name == "crash":
            print("fatal: the tool crashed", file=sys.stderr, flush=True)
            sys.exit(3)
        text = str(args.get("text", "done"))
        if name == "wait":
            start = time.time()
            time.sleep(float(args.get("seconds", 1)))
            text = json.dumps([start, time.time()])  # when it ran, for the tests of calls side by side
        result = {"content": [{"type": "text", "text": text}], "isError": False, "resultType": "complete"}
    else:
        result = None
    body = head + (b',"result":' + json.dumps(result).encode() if result is not None
                   else b',"error":{"code":-32601,"message":"no such method"}') + b"}\n"
    if on_length is not None:
        on_length(len(body))
    out.write(body)
    out.flush()


def serve_stdio(mode: str) -> None:
    out = sys.stdout.buffer
    if mode == "junk":
        out.write(b"Welcome! Server starting on stdio... (this is not JSON-RPC)\n")
        out.flush()
    if mode == "noisy":
        noise = b"noise " * 170_000 + b"\n"
        for _ in range(20):
            sys.stderr.buffer.write(noise)
        sys.stderr.flush()
    if mode == "helper":
        helper = subprocess.Popen(["sleep", "300"])
        print(f"helper {helper.pid}", file=sys.stderr, flush=True)
    for line in sys.stdin.buffer:
        if line.strip():
            answer(json.loads(line), mode, out)


class _EventStream:
    """Writes what `answer` writes as one SSE event (``event: message`` and a ``data:`` line)."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        out.write(b"event: message\ndata: ")

    def write(self, data: bytes) -> None:
        self.out.write(data.rstrip(b"\n") if data.endswith(b"\n") else data)

    def flush(self) -> None:
        self.out.write(b"\n\n")
        self.out.flush()


def serve_http(mode: str, port: int, unsized: bool, sse: bool = False) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            if request.get("id") is None:
                self.send_response(202)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream" if sse else "application/json")
            if mode == "junk":  # a body that is not JSON-RPC
                self.end_headers()
                self.wfile.write(b"<html>Welcome! This is not an MCP endpoint</html>")
                return
            try:
                if sse:
                    self.end_headers()
                    answer(request, mode, _EventStream(self.wfile))  # type: ignore[arg-type]
                    return
                if not unsized:
                    answer(request, mode, self.wfile, self.sized)
                    return
                self.end_headers()
                answer(request, mode, self.wfile)
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading past its cap
                self.close_connection = True

        def sized(self, length: int) -> None:
            self.send_header("content-length", str(length))
            self.end_headers()

        def do_GET(self) -> None:
            self.send_response(405)
            self.end_headers()

        def do_DELETE(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="big")
    parser.add_argument("--http", type=int, default=0)
    parser.add_argument("--unsized", action="store_true", help="HTTP: no Content-Length (read to the end)")
    parser.add_argument("--sse", action="store_true", help="HTTP: each answer as an SSE event")
    options = parser.parse_args()
    if options.http:
        serve_http(options.mode, options.http, options.unsized, options.sse)
    else:
        serve_stdio(options.mode)
