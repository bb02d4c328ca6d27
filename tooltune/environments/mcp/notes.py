"""A small stateful MCP server: a notes store, the test server of the `mcp` environment and an example.

Run it over stdio (what the `mcp` environment starts for a task whose server is a command)::

    python -m tooltune.environments.mcp.notes

or over streamable HTTP on the loopback interface (a task then names its URL,
``http://127.0.0.1:8765/mcp``)::

    python -m tooltune.environments.mcp.notes --http --port 8765

Tools (on the official `mcp` SDK's `MCPServer`; each tool's input schema is generated from its
signature): ``add_note(title, text, tags=[])``, ``get_note(title)``, ``list_notes(tag="")``,
``append_to_note(title, text)``, ``delete_note(title)`` and ``reset_notes()`` (empty the store: the
reset tool a task names when one server serves many episodes). A tool that cannot do what it was asked
(a missing note, a title already taken) raises the SDK's `ToolError`, which reaches the client as an
error result with its message. The state
is the process's own `NotesStore`; nothing is written to disk.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

MAX_NOTES = 1000
"""Notes the store holds at most (a model calling add_note in a loop cannot grow it without end)."""
MAX_TEXT = 10_000
"""Longest note text, in characters."""


class NotesStore:
    """The server's state: notes by title, each with its text and tags (plain Python, testable alone)."""

    def __init__(self) -> None:
        self.notes: dict[str, dict[str, Any]] = {}

    def add(self, title: str, text: str, tags: Sequence[str] = ()) -> dict[str, Any]:
        title = title.strip()
        if not title:
            raise ValueError("a note needs a title")
        if title in self.notes:
            raise ValueError(f"a note titled {title!r} already exists")
        if len(self.notes) >= MAX_NOTES:
            raise ValueError(f"the store is full ({MAX_NOTES} notes)")
        self.notes[title] = {"text": text[:MAX_TEXT], "tags": sorted(set(tags))}
        return {"saved": title, "notes": len(self.notes)}

    def get(self, title: str) -> dict[str, Any]:
        note = self._note(title)
        return {"title": title, "text": note["text"], "tags": note["tags"]}

    def titles(self, tag: str = "") -> list[str]:
        return sorted(t for t, n in self.notes.items() if not tag or tag in n["tags"])

    def append(self, title: str, text: str) -> dict[str, Any]:
        note = self._note(title)
        note["text"] = (note["text"] + "\n" + text)[:MAX_TEXT]
        return {"title": title, "text": note["text"]}

    def delete(self, title: str) -> dict[str, Any]:
        self._note(title)
        del self.notes[title]
        return {"deleted": title, "notes": len(self.notes)}

    def reset(self) -> dict[str, Any]:
        self.notes.clear()
        return {"notes": 0}

    def _note(self, title: str) -> dict[str, Any]:
        if title not in self.notes:
            raise ValueError(f"no note titled {title!r}; titles: {self.titles()[:20]}")
        return self.notes[title]


def build_server(store: NotesStore | None = None) -> Any:
    """The notes server (an `mcp.server.mcpserver.MCPServer`) on `store` (a fresh one by default)."""
    from mcp.server.mcpserver import MCPServer  # deferred: mcp is optional (the `mcp` environment)
    from mcp.server.mcpserver.exceptions import ToolError  # deferred: mcp is optional

    notes = store if store is not None else NotesStore()

    def run(method: Any, *args: Any) -> Any:
        """A store method; its ValueError becomes the SDK's ToolError, whose message the client sees."""
        try:
            return method(*args)
        except ValueError as e:
            raise ToolError(str(e)) from None

    server = MCPServer("tooltune-notes", instructions="A notes store: save, read, list and edit notes.",
                       log_level="WARNING")

    @server.tool()
    def add_note(title: str, text: str, tags: list[str] | None = None) -> dict[str, Any]:
        """Save a new note under a title that is not taken yet, with optional tags."""
        return run(notes.add, title, text, tags or [])

    @server.tool()
    def get_note(title: str) -> dict[str, Any]:
        """Read one note: its text and tags."""
        return run(notes.get, title)

    @server.tool()
    def list_notes(tag: str = "") -> list[str]:
        """The titles of all notes, or of the notes carrying a tag, sorted."""
        return run(notes.titles, tag)

    @server.tool()
    def append_to_note(title: str, text: str) -> dict[str, Any]:
        """Add a line of text at the end of an existing note."""
        return run(notes.append, title, text)

    @server.tool()
    def delete_note(title: str) -> dict[str, Any]:
        """Delete a note."""
        return run(notes.delete, title)

    @server.tool()
    def reset_notes() -> dict[str, Any]:
        """Delete every note (the store's initial state)."""
        return run(notes.reset)

    return server


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the notes store over stdio, or over streamable HTTP on 127.0.0.1 with ``--http``."""
    parser = argparse.ArgumentParser(prog="python -m tooltune.environments.mcp.notes", description=__doc__)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port on 127.0.0.1 (with --http)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    server = build_server()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        server.run()


if __name__ == "__main__":
    main()
