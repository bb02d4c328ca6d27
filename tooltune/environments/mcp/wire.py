"""The bytes an MCP server sends, bounded while they are read (both transports use it).

`MessageCutter` splits a byte stream into messages (newline-delimited lines for stdio and for the
lines of an SSE stream; the whole body for a JSON HTTP response) in time linear in the bytes read,
and keeps at most `cap` bytes of any message in memory: once a message grows past the cap, only its
first `HEAD_BYTES` and last `TAIL_BYTES` are kept and the rest is counted, not stored, until its end.

`Wire` is one connection's view of the traffic: it notes each request the client sends (its id and
method) and turns each message the server sends into what the SDK's session reads:

- a message within the cap goes on as it is, but for values nested deeper than `MESSAGE_DEPTH` levels:
  each is replaced, before anything decodes the message, by a string that says how deep it went
  (`schema.deep_marker`; found in one linear scan of the bytes, no recursion), since every JSON decoder
  on the way (Python's, the SDK's) recurses once per level and would fail the whole message; the
  answer to a tools/list request then has its bad tools left out, a tool too deep among them, with
  its depth (`tooltune.environments.mcp.schema.screen_tools`);
- a message over the cap becomes, for a tools/call request, a result whose text is the start of the
  server's text cut there, with ``_meta["tooltune/cut_bytes"]`` giving the full size of the answer
  (the environment notes it in the tool message); for any other request, a JSON-RPC error saying how
  large the answer was. Its request is the id read from the kept head or tail of the message, else
  the oldest request still unanswered;
- text that is not a JSON-RPC message is a protocol violation: `Wire.problem` says so with the first
  bytes the server wrote, and the transport ends the session (the caller gets it as one line).
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tooltune.environments.mcp.data import CUT_KEY
from tooltune.environments.mcp.schema import deep_marker, screen_tools

logger = logging.getLogger(__name__)

MESSAGE_BYTES = 4 * 1024 * 1024
"""Default cap, in bytes, on one message from a server (one tool result)."""
HEAD_BYTES = 64 * 1024
"""Bytes kept from the start of a message over the cap (the text the cut result shows comes from it)."""
TAIL_BYTES = 512
"""Bytes kept from the end of a message over the cap (where a server may write the request id)."""
MAX_PENDING = 1000
"""Unanswered requests remembered per connection (abandoned ones are forgotten oldest first)."""
MESSAGE_DEPTH = 100
"""Deepest nesting of objects and lists passed on in one message (a tool's input schema sits 5 levels
down; the SDK's decoder refuses about 200)."""
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a whole string, or a bracket


@dataclass(frozen=True)
class Oversized:
    """A message longer than the cap: its first and last bytes and its full size."""

    head: bytes
    tail: bytes
    size: int


class MessageCutter:
    """Messages out of a byte stream, each held in memory up to `cap` bytes (module docstring). With
    ``split=False`` the whole stream is one message, given by `finish`."""

    def __init__(self, cap: int = MESSAGE_BYTES, split: bool = True) -> None:
        self.cap, self.split = cap, split
        self.head_bytes = min(HEAD_BYTES, max(1, cap // 4))
        self._pieces: list[bytes] = []
        self._size = 0
        self._over: Oversized | None = None

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """The messages that `data` completes (without their newline)."""
        out: list[bytes | Oversized] = []
        start = 0
        while self.split:
            end = data.find(b"\n", start)
            if end < 0:
                break
            self._add(data[start:end])
            out.append(self._take())
            start = end + 1
        self._add(data[start:] if start else data)
        return out

    @property
    def over_cap(self) -> bool:
        """Whether the message being read has grown past the cap."""
        return self._over is not None

    def finish(self) -> bytes | Oversized | None:
        """The unterminated message at the end of the stream, or None when there is none."""
        if not self._size:
            return None
        return self._take()

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self._size += len(piece)
        if self._over is not None:  # past the cap: keep only the last bytes
            tail = self._over.tail + piece[-TAIL_BYTES:]
            self._over = Oversized(self._over.head, tail[-TAIL_BYTES:], self._size)
            return
        if self._size <= self.cap:
            self._pieces.append(piece)
            return
        head, kept = [], 0
        for p in self._pieces + [piece]:  # the head from the first pieces, without joining them all
            head.append(p[: self.head_bytes - kept])
            kept += len(head[-1])
            if kept >= self.head_bytes:
                break
        last = (self._pieces[-1] if self._pieces else b"") + piece[-TAIL_BYTES:]
        self._pieces = []
        self._over = Oversized(b"".join(head), last[-TAIL_BYTES:], self._size)

    def _take(self) -> bytes | Oversized:
        over, pieces = self._over, self._pieces
        self._pieces, self._size, self._over = [], 0, None
        return over if over is not None else b"".join(pieces)


_ID = r'(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")'
_TAIL_ID = re.compile(rb'"id"\s*:\s*' + _ID.encode() + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')
_TEXT_START = re.compile(rb'"text"\s*:\s*"')
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*')  # unrolled: the matcher keeps state per escape only


def bounded_depth(message: bytes, limit: int = MESSAGE_DEPTH) -> bytes:
    """`message` with every value nested deeper than `limit` levels replaced by `schema.deep_marker` of
    its depth (module docstring); the message itself when nothing is that deep. Linear in its length."""
    if message.count(b"[") + message.count(b"{") <= limit:
        return message
    out: list[bytes] = []
    depth = deepest = 0
    start = last = -1
    for m in _TOKENS.finditer(message):
        c = message[m.start()]
        if c == 0x22:  # a string: nothing in it counts
            continue
        if c in b"[{":
            depth += 1
            if depth == limit + 1:
                start, deepest = m.start(), depth
            deepest = max(deepest, depth)
        else:
            if depth == limit + 1 and start >= 0:
                out += [message[max(last, 0):start], json.dumps(deep_marker(deepest - limit)).encode()]
                last, start = m.end(), -1
            depth -= 1
    if start >= 0:  # never closed: not JSON anyway; what follows the cut is dropped
        out += [message[max(last, 0):start], json.dumps(deep_marker(deepest - limit)).encode()]
        return b"".join(out)
    if last < 0:
        return message
    out.append(message[last:])
    return b"".join(out)


def _head_id(head: bytes) -> Any:
    """The ``id`` of a message whose start is `head`, read from the top-level members before
    ``result`` or ``error``, or None."""
    text = head[:2048].decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    i = text.find("{") + 1
    if i <= 0:
        return None
    try:
        while True:
            while text[i] in " \t\r\n,":
                i += 1
            key, i = decoder.raw_decode(text, i)
            while text[i] in " \t\r\n:":
                i += 1
            if key in ("result", "error") or not isinstance(key, str):
                return None
            value, i = decoder.raw_decode(text, i)
            if key == "id":
                return value
    except (ValueError, IndexError, RecursionError):
        return None


def _tail_id(tail: bytes) -> Any:
    m = _TAIL_ID.search(tail)
    if m is None:
        return None
    try:
        return json.loads(m.group(1))
    except ValueError:
        return None


def _head_text(head: bytes) -> str:
    """The start of the first ``"text"`` string in `head` (a cut JSON string, decoded)."""
    m = _TEXT_START.search(head)
    if m is None:
        return ""
    body = _STRING_BODY.match(head, m.end())
    raw = body.group(0) if body else b""
    for trim in range(8):  # a cut can split an escape sequence or a UTF-8 character: drop its start
        try:
            return json.loads(b'"' + raw[: len(raw) - trim] + b'"')
        except ValueError:
            continue
    return ""


class Wire:
    """One connection's traffic, seen by its transport (module docstring). `server` names the server
    in warnings."""

    def __init__(self, server: str, cap: int = MESSAGE_BYTES) -> None:
        self.server, self.cap = server, cap
        self.pending: OrderedDict[Any, str] = OrderedDict()
        self.problem = ""
        """Why the server's traffic is not MCP ('' while it is)."""
        self.cuts = 0
        """Messages cut so far."""

    def sent(self, message: Any) -> None:
        """Note a message the client sends (a request's id and method)."""
        method, ident = getattr(message, "method", None), getattr(message, "id", None)
        if isinstance(message, dict):
            method, ident = message.get("method"), message.get("id")
        if method is None or ident is None:
            return
        self.pending[ident] = str(method)
        while len(self.pending) > MAX_PENDING:
            self.pending.popitem(last=False)

    def received(self, message: bytes | Oversized, answers: Any = None) -> bytes | None:
        """The message the session reads in place of `message`, or None when there is nothing to pass on
        (a blank line, an oversized message no request waits for, or a protocol violation: `problem`).
        `answers`: the id of the request the message answers when the transport knows it (an HTTP
        response to one POST), used for an oversized message whose own id cannot be read."""
        if isinstance(message, Oversized):
            return self._cut(message, answers)
        if not message.strip():
            return None
        if message.lstrip()[:1] not in (b"{", b"["):
            return self.violation(message)
        message = bounded_depth(message)
        ident = _head_id(message)
        method = self.pending.pop(ident, None) if ident is not None else None
        if method != "tools/list":
            return message
        try:
            answer = json.loads(message)
        except (ValueError, RecursionError):
            return self.violation(message)
        if not isinstance(answer, dict):
            return message
        return json.dumps(screen_tools(answer, self.server)).encode()

    def violation(self, message: bytes) -> None:
        """Record that the server sent `message`, which is not MCP (the first violation is kept)."""
        if not self.problem:
            self.problem = (f"it wrote text that is not an MCP (JSON-RPC) message: {message[:80]!r}"
                            f"{' …' if len(message) > 80 else ''}")
        return None

    def _cut(self, message: Oversized, answers: Any = None) -> bytes | None:
        self.cuts += 1
        ident = _head_id(message.head)
        ident = _tail_id(message.tail) if ident is None else ident
        ident = answers if ident is None else ident
        if ident is None or ident not in self.pending:
            ident = next(iter(self.pending), None)
        if ident is None:
            logger.warning("MCP server %r: dropped a %d-byte message that answers no request", self.server,
                           message.size)
            return None
        method = self.pending.pop(ident)
        if method == "tools/call":
            text = _head_text(message.head)
            result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False,
                                      "resultType": "complete", "_meta": {CUT_KEY: message.size}}
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "result": result}
        else:
            reply = {"jsonrpc": "2.0", "id": ident, "error": {
                "code": -32603, "message": f"the server's answer to {method} was {message.size} bytes, "
                                           f"more than the {self.cap}-byte cap on one message"}}
        logger.warning("MCP server %r: its %d-byte answer to %s was cut at %d bytes", self.server,
                       message.size, method, self.cap)
        return json.dumps(reply).encode()
