"""`mcp.wire`: a server's bytes split into messages in linear time with at most the cap in memory, a
message over the cap cut into a result that notes its full size, text that is not MCP recorded with its
first bytes, and bad tools left out of a tools/list answer."""

from __future__ import annotations

import json
import logging
import tracemalloc

import pytest

from tooltune.environments.mcp import schema as mcp_schema
from tooltune.environments.mcp.data import CUT_KEY
from tooltune.environments.mcp.wire import MessageCutter, Oversized, Wire

CAP = 256 * 1024


def _big_answer(ident: int, size: int, chunk: int = 64 * 1024):
    """The bytes of a tools/call answer with a `size`-byte text, in `chunk`-byte pieces (made as they
    are read, so that only the cutter's own memory is measured)."""
    yield (json.dumps({"jsonrpc": "2.0", "id": ident})[:-1].encode()
           + b',"result":{"content":[{"type":"text","text":"')
    for start in range(0, size, chunk):
        yield b"y" * min(chunk, size - start)  # a new object per piece, as a reader gets them
    yield b'"}],"isError":false}}\n'


def test_messages_are_split_at_newlines_whatever_the_chunks():
    cutter = MessageCutter(cap=1000)
    stream = b'{"a":1}\n{"b":2}\n\n{"c":3}\n{"d"'
    got = [m for i in range(0, len(stream), 3) for m in cutter.feed(stream[i:i + 3])]
    assert got == [b'{"a":1}', b'{"b":2}', b"", b'{"c":3}'] and cutter.finish() == b'{"d"'
    whole = MessageCutter(cap=1000, split=False)
    assert whole.feed(b'{"a":\n1}') == [] and whole.finish() == b'{"a":\n1}'


@pytest.mark.parametrize("size", [20 * 1024 * 1024, 60 * 1024 * 1024])
def test_an_oversized_message_costs_less_than_twice_the_cap_in_memory(size: int):
    """The figure: traced peak memory while a 20 MB / 60 MB answer passes a 256 KB cap."""
    cutter = MessageCutter(cap=CAP)
    tracemalloc.start()
    try:
        out = [m for piece in _big_answer(7, size) for m in cutter.feed(piece)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (message,) = out
    assert isinstance(message, Oversized) and message.size > size
    assert len(message.head) <= cutter.head_bytes and peak < 2 * CAP, peak


def test_reading_is_linear_in_the_pieces_fed():
    """Each byte is looked at a bounded number of times: the pieces kept never exceed the cap, and a
    message under the cap is joined once (not re-joined for every piece read)."""
    cutter = MessageCutter(cap=CAP)
    pieces = list(_big_answer(1, CAP // 2, chunk=4096))
    joins = 0
    for piece in pieces:
        before = len(cutter._pieces)
        out = cutter.feed(piece)
        joins += len(out)
        assert len(cutter._pieces) in (before + 1, 0)  # appended, never rebuilt
    assert joins == 1


def test_a_cut_tools_call_answer_is_a_result_with_the_start_of_the_text_and_the_full_size():
    wire = Wire("hostile", cap=CAP)
    wire.sent({"jsonrpc": "2.0", "id": 3, "method": "tools/call"})
    cutter = MessageCutter(cap=CAP)
    (message,) = [m for piece in _big_answer(3, 5_000_000) for m in cutter.feed(piece)]
    reply = json.loads(wire.received(message))
    assert reply["id"] == 3 and reply["result"]["_meta"][CUT_KEY] == message.size
    text = reply["result"]["content"][0]["text"]
    assert text and set(text) == {"y"} and len(text) < cutter.head_bytes
    assert not wire.pending and wire.cuts == 1


def test_the_id_is_read_from_the_tail_and_other_requests_get_an_error():
    wire = Wire("hostile", cap=100)
    wire.sent({"jsonrpc": "2.0", "id": 1, "method": "tools/call"})
    wire.sent({"jsonrpc": "2.0", "id": "list-2", "method": "tools/list"})
    body = b'{"result":{"tools":[' + b'{"name":"x"},' * 50 + b'{}]},"id":"list-2","jsonrpc":"2.0"}'
    cutter = MessageCutter(cap=100, split=False)
    cutter.feed(body)
    reply = json.loads(wire.received(cutter.finish()))
    assert reply["id"] == "list-2" and "more than the 100-byte cap" in reply["error"]["message"]
    assert list(wire.pending) == [1]


def test_text_that_is_not_mcp_is_recorded_with_its_first_bytes():
    wire = Wire("hostile")
    assert wire.received(b"Server ready on stdio!") is None
    assert wire.problem == "it wrote text that is not an MCP (JSON-RPC) message: b'Server ready on stdio!'"
    assert "\n" not in wire.problem


def test_bad_tools_are_left_out_of_a_tools_list_answer(caplog: pytest.LogCaptureFixture):
    mcp_schema._WARNED.clear()
    wire = Wire("hostile")
    tools = [{"name": "ok", "inputSchema": {"type": "object"}}, {"name": "bad", "inputSchema": "object"}]
    answer = {"jsonrpc": "2.0", "id": 2, "result": {"tools": tools}}
    with caplog.at_level(logging.WARNING):
        for _ in range(3):  # every episode of a restarted server lists them: one warning in all
            wire.sent({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            out = json.loads(wire.received(json.dumps(answer).encode()))
            assert [t["name"] for t in out["result"]["tools"]] == ["ok"]
    (line,) = [r.getMessage() for r in caplog.records]
    assert "'bad' left out" in line and "not a JSON-Schema object" in line
