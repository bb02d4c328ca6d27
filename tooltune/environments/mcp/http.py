"""The streamable HTTP transport of an MCP server at a URL, with every response bounded while it is read.

The SDK's streamable HTTP client does the protocol (sessions, SSE streams, reconnection); it is given an
HTTP client (`bounded_http_client`) whose transport passes each response body through a
`wire.MessageCutter` before the SDK reads it: a JSON body is one message, an SSE body is split into
lines and each ``data:`` line is one message. The request that a response answers is read from the
body the client posted, so a body over the cap becomes the cut result or error `wire.Wire` writes,
and a body that is not JSON-RPC becomes a JSON-RPC error that says what the server sent. Nothing past
the cap of one message is held in memory. A JSON body that declares its length (``Content-Length``) is
not read past the cap: its declared length is the size noted, and the connection is dropped; one
without is read to its end, counted, not kept.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tooltune.environments.mcp.wire import MessageCutter, Oversized, Wire

CHUNK_BYTES = 1 << 16
"""Bytes read from a response at once."""
SSE_SLACK = 1 << 16
"""Room above the message cap for an SSE event's other fields (the SDK's own event-size limit)."""


def _sse_line(wire: Wire, line: bytes | Oversized) -> bytes | None:
    """One line of an SSE body as the SDK reads it: a ``data:`` line through `wire`, others as they are."""
    if isinstance(line, Oversized):
        field = line.head.split(b":", 1)[0].strip()
        if field != b"data":
            return None
        out = wire.received(line)
        return None if out is None else b"data: " + out
    if not line.startswith(b"data:"):
        return line
    message = line[5:].strip()
    out = wire.received(message) if message else message
    if out is None and wire.problem:
        out = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                          "params": {"level": "error", "data": wire.problem}}).encode()
    return None if out is None else b"data: " + out


class _BoundedBody:
    """A response body read through `wire` (module docstring); an httpx2 `AsyncByteStream`."""

    def __init__(self, inner: Any, wire: Wire, sse: bool, ident: Any, length: int | None) -> None:
        self.inner, self.wire, self.sse, self.ident, self.length = inner, wire, sse, ident, length

    async def __aiter__(self) -> AsyncIterator[bytes]:
        cutter = MessageCutter(self.wire.cap, split=self.sse)
        async for chunk in self.inner:
            for line in cutter.feed(chunk):
                out = _sse_line(self.wire, line)
                if out is not None:
                    yield out + b"\n"
            if self.length is not None and cutter.over_cap:
                break  # a JSON body of known length: the rest is not read (the connection is dropped)
        rest = cutter.finish()
        if rest is None:
            return
        if isinstance(rest, Oversized) and self.length is not None:
            rest = Oversized(rest.head, rest.tail, max(self.length, rest.size))
        if self.sse:
            out = _sse_line(self.wire, rest)
            if out is not None:
                yield out + b"\n\n"
            return
        out = self.wire.received(rest, self.ident)
        if out is None and self.ident is not None:
            problem = self.wire.problem or "an empty answer"
            self.wire.problem = ""  # one bad answer fails its request, not the connection
            out = json.dumps({"jsonrpc": "2.0", "id": self.ident,
                              "error": {"code": -32700, "message": problem}}).encode()
        if out is not None:
            yield out

    async def aclose(self) -> None:
        await self.inner.aclose()


def bounded_http_client(wire: Wire) -> Any:
    """An httpx2 client for the SDK's streamable HTTP transport whose responses go through `wire`."""
    import httpx2  # deferred: comes with mcp
    from mcp.shared._httpx_utils import (  # deferred: mcp is optional
        MCP_DEFAULT_SSE_READ_TIMEOUT,
        MCP_DEFAULT_TIMEOUT,
    )

    class BoundedBody(_BoundedBody, httpx2.AsyncByteStream):
        pass

    class BoundedTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            ident = None
            if request.method == "POST":
                try:
                    sent = json.loads(await request.aread())
                except ValueError:
                    sent = None
                if isinstance(sent, dict):
                    wire.sent(sent)
                    ident = sent.get("id")
            response = await self.inner.handle_async_request(request)
            kind = response.headers.get("content-type", "").lower()
            if not kind.startswith(("application/json", "text/event-stream")):
                return response
            headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() != "content-length"]
            sse = kind.startswith("text/event-stream")
            length = response.headers.get("content-length", "")
            known = int(length) if length.isdigit() and not sse else None
            body = BoundedBody(response.stream, wire, sse, ident, known)
            return httpx2.Response(response.status_code, headers=headers, stream=body,
                                   extensions=response.extensions)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return httpx2.AsyncClient(transport=BoundedTransport(),
                              timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT))


@asynccontextmanager
async def http_transport(url: str, wire: Wire) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's streamable HTTP transport to `url`, its responses bounded by `wire`."""
    from mcp.client.streamable_http import streamable_http_client  # deferred: mcp is optional

    limit = wire.cap + SSE_SLACK
    async with bounded_http_client(wire) as client, \
            streamable_http_client(url, http_client=client, max_sse_event_size=limit) as streams:
        yield streams
