"""The plain data of the `mcp` environment: where an MCP server is (`McpServer`) and what one tool call
returned (`McpResult`, converted from the SDK's result without importing the SDK)."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

CUT_KEY = "tooltune/cut_bytes"
"""The ``_meta`` key of a result cut while it was read (`wire`): the server's whole answer, in bytes."""
MAX_VALUE_CHARS = 1_000_000
"""A result text longer than this is not read as JSON for a result check (it stays text)."""


def parse_argv(value: Any, where: str) -> tuple[str, ...]:
    """A command as argv: a command line (split as a POSIX shell splits words; nothing runs through a
    shell) or a list of strings; ValueError naming `where`."""
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    if not (isinstance(value, (list, tuple)) and all(isinstance(a, str) for a in value)):
        raise ValueError(f"{where}: expected a command line or a list of strings")
    return tuple(value)


@dataclass(frozen=True)
class McpServer:
    """Where an MCP server is: ``command`` (argv, run without a shell, with ``env`` added to the
    variables the SDK passes on and in ``cwd``) or ``url`` (streamable HTTP)."""

    command: tuple[str, ...] = ()
    url: str = ""
    env: tuple[tuple[str, str], ...] = ()
    cwd: str = ""

    @classmethod
    def parse(cls, value: Any, where: str = "server") -> McpServer:
        """A server from a task or a setting: an ``http://`` / ``https://`` URL; a command line (split as
        a POSIX shell splits words; nothing runs through a shell); a list of argv strings; or an object
        ``{"command": line or argv, "env": {name: value}, "cwd": folder}`` or ``{"url": ...}``.
        ValueError names `where`."""
        if isinstance(value, McpServer):
            return value
        if isinstance(value, str):
            text = value.strip()
            if text.startswith(("http://", "https://")):
                return cls(url=text)
            value = {"command": text}
        elif isinstance(value, (list, tuple)):
            value = {"command": list(value)}
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected a command line, an argv list, a URL or an object, "
                             f"got {type(value).__name__}")
        unknown = sorted(set(value) - {"command", "url", "env", "cwd"})
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown}; expected command or url, env, cwd")
        if bool(value.get("command")) == bool(value.get("url")):
            raise ValueError(f"{where}: give exactly one of command and url")
        url = value.get("url") or ""
        if url and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            raise ValueError(f"{where}.url: expected an http:// or https:// URL, got {url!r:.200}")
        command = parse_argv(value.get("command") or (), f"{where}.command")
        env = value.get("env") or {}
        if not (isinstance(env, Mapping) and all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in env.items())):
            raise ValueError(f"{where}.env: expected an object of string values")
        cwd = value.get("cwd") or ""
        if not isinstance(cwd, str):
            raise ValueError(f"{where}.cwd: expected a folder path")
        if url and (env or cwd):
            raise ValueError(f"{where}: env and cwd apply to a command, not to a url")
        return cls(command=tuple(command), url=url, env=tuple(sorted(env.items())), cwd=cwd)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `parse` reads back (what a task stores)."""
        if self.url:
            return {"url": self.url}
        out: dict[str, Any] = {"command": list(self.command)}
        if self.env:
            out["env"] = dict(self.env)
        if self.cwd:
            out["cwd"] = self.cwd
        return out

    def describe(self) -> str:
        """The whole command line or URL (for logs and the user)."""
        return self.url or shlex.join(self.command)

    @property
    def name(self) -> str:
        """A short name without folders, tokens or URL paths, for text a model may read: the program's
        file name, followed by its module (``-m module``) or by the file name of its first argument when
        that is not an option (``python server.py``, ``uvx mcp-server-git``); the scheme, host and port
        of a URL."""
        if self.url:
            parts = urlsplit(self.url)
            return f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
        words = [os.path.basename(self.command[0])]
        rest = list(self.command[1:])
        if rest[:1] == ["-m"] and len(rest) > 1:
            words += ["-m", rest[1]]
        elif rest and not rest[0].startswith("-"):
            words.append(os.path.basename(rest[0].rstrip("/")))
        return " ".join(words)[:120]


@dataclass(frozen=True)
class McpResult:
    """One tool call's result: the text the model is shown (content blocks joined by newlines, not yet
    cut), its value (`result_value`), whether the server flagged it as an error or it timed out, and,
    for an answer longer than the message cap (cut while it was read), its full size in bytes."""

    text: str
    value: Any = None
    error: bool = False
    timed_out: bool = False
    cut_bytes: int = 0


def _block_text(block: Any) -> str:
    """One content block as text: text as it is, anything else as a short placeholder."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(getattr(block, "data", ""))
        return f"[{kind} {getattr(block, 'mime_type', '')}, {size} base64 characters]"
    if kind == "resource_link":
        return f"[resource {getattr(block, 'uri', '')}]"
    if kind == "resource":
        res = getattr(block, "resource", None)
        text = getattr(res, "text", None)
        return text if isinstance(text, str) else f"[resource {getattr(res, 'uri', '')}, binary]"
    return f"[{kind or type(block).__name__} content]"


def result_value(structured: Any, text: str) -> Any:
    """The value a result check compares: the structured content when the server gave one (the SDK's
    ``{"result": x}`` wrapper of a tool that returns a non-object unwrapped to ``x``), else the text read
    as JSON when it is JSON, else the text."""
    if structured is not None:
        if isinstance(structured, dict) and list(structured) == ["result"]:
            return structured["result"]
        return structured
    if len(text) <= MAX_VALUE_CHARS:
        try:
            return json.loads(text)
        except ValueError:  # JSONDecodeError and too-deep nesting alike
            pass
        except RecursionError:
            pass
    return text


def convert_result(result: Any) -> McpResult:
    """An SDK `CallToolResult` as an `McpResult` (a result cut while it was read carries its full size
    under ``_meta["tooltune/cut_bytes"]``: `McpResult.cut_bytes`)."""
    structured = getattr(result, "structured_content", None)
    blocks = list(getattr(result, "content", None) or [])
    text = "\n".join(_block_text(b) for b in blocks)
    if not blocks and structured is not None:
        text = json.dumps(structured, sort_keys=True, default=str)
    meta = getattr(result, "meta", None)
    cut = meta.get(CUT_KEY) if isinstance(meta, dict) else None
    cut = cut if type(cut) is int and cut > 0 else 0
    value = text if cut else result_value(structured, text)
    return McpResult(text, value, bool(getattr(result, "is_error", False)), cut_bytes=cut)
