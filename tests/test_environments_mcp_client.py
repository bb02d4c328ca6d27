"""MCP servers written with the official SDK (tests/mcp_sdk_server.py: `MCPServer`, typed tools with output
schemas) and hand-written ones (tests/mcp_hostile_server.py), over stdio and streamable HTTP: a 50 MB
answer is cut and the session goes on, with the step noting the size; a schema nested 10,000 levels
loses its tool and nothing else, the warning naming the depth; a tool list that pages for ever is cut
with a line saying so and counts each tool once; JavaScript-dialect patterns keep their tool."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from test_environments_mcp_environment import wait_for  # noqa: E402
from test_environments_mcp_stdio import HOSTILE, free_port, hostile, http_big  # noqa: E402

from tooltune.data.mcp_tasks import task_from_record  # noqa: E402
from tooltune.environments.mcp import McpEnvironment, McpSettings  # noqa: E402
from tooltune.environments.mcp import schema as mcp_schema  # noqa: E402
from tooltune.environments.mcp.client import MAX_TOOL_PAGES, McpConnection, close_all  # noqa: E402
from tooltune.environments.mcp.data import McpServer  # noqa: E402
from tooltune.environments.mcp.wire import HEAD_BYTES  # noqa: E402
from tooltune.schema import ToolCall  # noqa: E402

SDK = [sys.executable, str(Path(__file__).with_name("mcp_sdk_server.py"))]
BIG = 50_000_000


@pytest.fixture(autouse=True)
def closed() -> Iterator[None]:
    mcp_schema._WARNED.clear()
    yield
    close_all()


@contextmanager
def sdk_server(transport: str) -> Iterator[McpServer]:
    """The SDK-written server over stdio (a command) or streamable HTTP (a URL)."""
    if transport == "stdio":
        yield McpServer.parse(SDK)
        return
    port = free_port()
    proc = subprocess.Popen([*SDK, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def listening() -> bool:
            import socket

            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        assert wait_for(listening, 30)
        yield McpServer.parse(f"http://127.0.0.1:{port}/mcp")
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_sdk_server_answering_50_mb_keeps_its_session(transport: str, caplog: pytest.LogCaptureFixture):
    """The SDK sends the answer as text and as structured content (100 MB on the wire); its client checks
    results against the tool's output schema, which the cut result could not satisfy: the schemas are
    not passed on, the cut result is accepted, and the next calls are answered."""
    with sdk_server(transport) as server, caplog.at_level(logging.WARNING):
        conn = McpConnection(server, start_seconds=30, call_seconds=30).start()
        try:
            names = sorted(t.name for t in conn.list_tools())
            assert names == ["blob", "echo", "stats", "word"]  # deep is left out (below)
            small = conn.call("blob", {"size": 1_000_000})
            assert small.text == "y" * 1_000_000 and small.value == small.text and small.cut_bytes == 0
            cut = conn.call("blob", {"size": BIG})
            assert not cut.error and cut.cut_bytes > 2 * BIG  # the text and its structured copy
            assert 0 < len(cut.text) <= HEAD_BYTES and set(cut.text) == {"y"}
            assert conn.call("echo", {"text": "still here"}).text == "still here"
            assert conn.call("stats", {"size": 7}).value == {"size": 7, "head": "yyyyyyy"}
            assert conn.broken == ""
        finally:
            conn.close()
    deep = [r.getMessage() for r in caplog.records if "'deep' left out" in r.getMessage()]
    assert deep and "nested 203 levels deep, deeper than 64 levels" in deep[0]


def test_the_step_of_an_sdk_server_answering_50_mb_says_how_large_it_was():
    with sdk_server("stdio") as server:
        conn = McpConnection(server, start_seconds=30).start()
        tools = conn.list_tools()
        conn.close()
        record = {"id": "big", "prompt": "blob", "reset": "none",
                  "check": {"kind": "answer", "contains": ["y"]}}
        env = McpEnvironment(McpSettings(result_chars=300, call_seconds=30))
        env.reset(task_from_record(record, server, tools))
        try:
            out = env.step(ToolCall("blob", {"size": BIG}))
            assert not out.error and len(out.content) == 300 and out.content.endswith(" bytes in all]")
            size = re.search(r"the server's answer was (\d+) bytes in all\]$", out.content)
            assert size and int(size.group(1)) > 2 * BIG
            assert env.step(ToolCall("echo", {"text": "next"})).content == "next"
        finally:
            env.close()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_schema_nested_10000_levels_loses_its_tool_not_the_server(transport: str,
                                                                      caplog: pytest.LogCaptureFixture):
    """Before this, 500 levels ended the session (the JSON decoder's recursion); the message is made
    shallow before anything decodes it."""
    served = http_big([], "deep") if transport == "http" else _none()
    with served as where, caplog.at_level(logging.WARNING):
        conn = McpConnection(McpServer.parse(where) if where else hostile("deep"), start_seconds=20).start()
        try:
            assert [t.name for t in conn.list_tools()] == ["echo"]
            assert conn.call("echo", {"text": "alive"}).text == "alive" and conn.broken == ""
        finally:
            conn.close()
    (line,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert "tool 'deep' left out: its input schema is nested 20001 levels deep, deeper than 64" in line


@contextmanager
def _none() -> Iterator[None]:
    yield None


def test_a_tool_list_that_pages_for_ever_is_cut_saying_so_and_counts_each_tool_once(
        caplog: pytest.LogCaptureFixture):
    conn = McpConnection(hostile("paging"), start_seconds=20).start()
    try:
        with caplog.at_level(logging.WARNING):
            assert sorted(t.name for t in conn.list_tools()) == ["echo", "page"]
    finally:
        conn.close()
    assert conn.list_cut == (f"the tool list was cut after {MAX_TOOL_PAGES} pages (it was still paging): "
                             f"2 distinct tools read, {2 * MAX_TOOL_PAGES - 2} listed again")
    assert any(conn.list_cut in r.getMessage() for r in caplog.records)


def test_patterns_in_the_javascript_dialect_keep_their_tool(caplog: pytest.LogCaptureFixture):
    """The SDK server's `word` declares ``^\\p{L}+$`` and ``(?<year>\\d{4})``: read in JSON Schema's dialect,
    the tool is offered and its calls checked (the pattern is the server's to assert)."""
    from tooltune.environments.mcp.task import check_call

    with sdk_server("stdio") as server, caplog.at_level(logging.WARNING):
        conn = McpConnection(server, start_seconds=30).start()
        try:
            word = next(t for t in conn.list_tools() if t.name == "word")
            assert check_call(ToolCall("word", {"word": "été", "year": "2026"}), word) is None
            assert conn.call("word", {"word": "été", "year": "2026"}).text == "été 2026"
        finally:
            conn.close()
    assert not [r for r in caplog.records if "'word'" in r.getMessage()]


def test_a_pattern_no_dialect_reads_is_ignored_with_a_warning_and_the_tool_kept():
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(["},
                                               "b": {"type": "string", "pattern": r"^\p{Lu}(?<rest>\w*)$"}}}
    assert mcp_schema.schema_problem(schema) is None
    (note,) = mcp_schema.schema_notes(schema)
    assert note.startswith("pattern '([' is ignored: it is not a regular expression tooltune can read")
    assert mcp_schema.python_pattern(r"(?<y>\d{4})-\k<y>\p{L}[^]\u{1F600}") == \
        r"(?P<y>\d{4})-(?P=y)\w[\s\S]\U0001f600"
    assert mcp_schema.pattern_problem(r"^(\p{L}+)+$") is not None  # still refused: it backtracks


def test_the_hostile_server_deep_schema_is_the_one_the_json_module_cannot_read():
    """The 10,000-level schema is written as text by the test server; reading it with the standard JSON
    decoder fails (the reason this has to be bounded before decoding)."""
    import json

    sys.path.insert(0, str(Path(HOSTILE[1]).parent))
    from mcp_hostile_server import DEEP_LEVELS, deep_schema_json

    with pytest.raises(RecursionError):
        json.loads(deep_schema_json(DEEP_LEVELS))
