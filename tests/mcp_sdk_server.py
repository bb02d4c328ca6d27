"""An MCP server written the ordinary way, on the official SDK's `MCPServer` (FastMCP before SDK 2), with
typed tools: each return type gives the tool an output schema (``-> str`` becomes ``{"result": string}``)
and the SDK sends every answer twice, as text content and as structured content.

Tools: ``echo(text) -> str``; ``blob(size) -> str`` (``size`` bytes of text, 50 MB as easily as 5);
``stats(size) -> Stats`` (a pydantic model); ``word(word, year)`` whose parameters carry JSON-Schema
patterns in their JavaScript dialect (``^\\p{L}+$``, ``(?<year>\\d{4})``, which pydantic's Rust engine
reads); ``deep(a) -> str``, whose input schema is replaced by one nested `DEEP` properties deep (the
deepest the SDK can still serialize). Stdio by default, streamable HTTP on 127.0.0.1 with ``--http PORT``.
"""

from __future__ import annotations

import argparse
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

DEEP = 100
"""Properties nested in `deep`'s input schema (201 JSON levels; the SDK refuses to serialize ~250)."""


class Stats(BaseModel):
    size: int
    head: str


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def build() -> MCPServer:
    server = MCPServer("sdk-typed", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool()
    def blob(size: int) -> str:
        """A text of `size` bytes."""
        return "y" * size

    @server.tool()
    def stats(size: int) -> Stats:
        """The size asked for and the first bytes of such a text."""
        return Stats(size=size, head="y" * min(size, 10))

    @server.tool()
    def word(word: Annotated[str, Field(pattern=r"^\p{L}+$")],
             year: Annotated[str, Field(pattern=r"^(?<year>\d{4})$")]) -> str:
        """A word of letters and a year."""
        return f"{word} {year}"

    @server.tool()
    def deep(a: str) -> str:
        """A tool whose input schema nests deep."""
        return a

    server._tool_manager._tools["deep"].parameters = _deep(DEEP)  # what no signature would generate
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP on this port")
    args = parser.parse_args()
    server = build()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
