"""Task files of the `mcp` environment, checked against the live server's tools.

A task file is JSONL, one task a line (blank lines are skipped), in either of two forms:

- short: ``{"id", "prompt" (or "messages"), "tools", "answer", "reset", "prepare", "setup", "check"}``,
  where ``tools`` names the server's tools the model is offered (default: all of them but the reset
  tool), ``answer`` the calls of the first step (optional: for SFT and single-step training) and
  ``reset``, ``prepare``, ``setup`` and ``check`` are those of `tooltune.environments.mcp`;
- canonical: a `Sample` (``id``, ``category``, ``messages``, ``tools``, ``answer``, ``meta``) whose
  ``meta["env"]`` is an ``mcp`` task.

`check_tasks` turns each line into a canonical task `Sample` for the server: its ``tools`` are the
server's own specs (name, description, input schema) of the offered tools, and ``meta["env"]`` names
the server. A line is rejected, with its line number and the reason, when it is not a JSON object of
either form, its id repeats an earlier one, it offers a tool the server does not list, or one of its
calls (answer, reset, setup, checks) names such a tool or has arguments that do not fit the tool's
input schema (an argument the schema does not name, a missing required one, a wrong type or value:
`tooltune.environments.mcp.check_call`); the answer may call offered tools only. A task that names
another server than the one checked against is rejected too: it was not checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tooltune.environments.base import check_literals, spec_by_name
from tooltune.environments.mcp import (
    ENVIRONMENT,
    McpConnection,
    McpServer,
    McpSettings,
    check_call,
    read_task,
)
from tooltune.schema import Sample, SchemaError, ToolCall, ToolSpec, calls_from_any, decode_line, loads_record

SHORT_FIELDS = ("id", "prompt", "messages", "tools", "answer", "reset", "prepare", "setup", "check")


@dataclass
class McpTaskReport:
    """What `check_tasks` found: the accepted tasks, the rejected lines (number, reason) and the server's
    tools they were checked against (each name once), and why that list is incomplete ('' when it is
    whole: `McpConnection.list_cut`)."""

    tasks: list[Sample] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    tools_cut: str = ""

    @property
    def ok(self) -> bool:
        return not self.rejected


def _call_problem(call: ToolCall, where: str, tools: dict[str, ToolSpec]) -> str | None:
    spec = tools.get(call.name)
    if spec is None:
        return f"{where}: unknown tool {call.name!r:.80} (the server lists {sorted(tools)[:50]})"
    problem = check_literals(call) or check_call(call, spec)
    return f"{where}: {problem}" if problem else None


def task_from_record(record: Any, server: McpServer, tools: Sequence[ToolSpec]) -> Sample:
    """One line's task as a canonical `Sample` for `server` (whose tools are `tools`); ValueError (or
    SchemaError) naming the field when the line is rejected (module docstring)."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    by_name = spec_by_name(tools)
    if "meta" in record or "category" in record:  # canonical
        sample = Sample.from_dict(record, "task")
        env = sample.meta.get("env")
        if not isinstance(env, dict) or env.get("name") != ENVIRONMENT:
            raise ValueError(f"meta.env: a canonical task needs meta.env with name {ENVIRONMENT!r}")
        env = dict(env)
        messages, answer, offered = sample.messages, sample.answer, [t.name for t in sample.tools]
    else:
        unknown = sorted(set(record) - set(SHORT_FIELDS))
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}; a task line has {list(SHORT_FIELDS)} "
                             "(or is a canonical sample with meta.env)")
        if ("prompt" in record) == ("messages" in record):
            raise ValueError("give exactly one of prompt and messages")
        prompt = record.get("prompt")
        if "prompt" in record and not (isinstance(prompt, str) and prompt.strip()):
            raise ValueError("prompt: expected a non-empty string")
        messages = [{"role": "user", "content": prompt}] if "prompt" in record else record["messages"]
        answer = calls_from_any(record.get("answer") or [], "answer")
        env = {k: record[k] for k in ("reset", "prepare", "setup", "check") if k in record}
        offered = record.get("tools")
        sample = None
    named = McpServer.parse(env["server"], "meta.env.server") if env.get("server") is not None else server
    if named != server:
        raise ValueError(f"meta.env.server: names {named.describe()!r:.200}, not the server checked "
                         f"against ({server.describe()!r:.200})")
    env = {**env, "name": ENVIRONMENT, "server": server.to_dict()}
    task = read_task(env)
    reset_tool = task.reset.name if isinstance(task.reset, ToolCall) else None
    if offered is None:
        offered = [t.name for t in tools if t.name != reset_tool]
    if not (isinstance(offered, list) and offered and all(isinstance(n, str) for n in offered)):
        raise ValueError("tools: expected a non-empty list of tool names")
    missing = [n for n in offered if n not in by_name]
    if missing:
        raise ValueError(f"tools: unknown tool(s) {missing} (the server lists {sorted(by_name)[:50]})")
    offered_specs = {n: by_name[n] for n in offered}
    for i, c in enumerate(answer):
        problem = _call_problem(c, f"answer[{i}]", offered_specs)
        if problem:
            raise ValueError(problem)
    for where, c in task.server_calls():
        problem = _call_problem(c, where, by_name)
        if problem:
            raise ValueError(problem)
    return Sample(
        id=str(record["id"]) if sample is None else sample.id,
        source="mcp" if sample is None else sample.source,
        category="multi_step" if sample is None else sample.category,
        messages=messages,
        tools=[by_name[n] for n in dict.fromkeys(offered)],
        answer=answer,
        meta={**(sample.meta if sample is not None else {}), "env": env},
    )


def check_tasks(path: str, server: McpServer, tools: Sequence[ToolSpec]) -> McpTaskReport:
    """Every line of the task file `path` checked against `tools` (the server's list): accepted tasks
    and rejected lines. A missing file raises FileNotFoundError."""
    report = McpTaskReport(tools=list(tools))
    seen: set[str] = set()
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = decode_line(raw, "")
                if not line.strip():
                    continue
                record = loads_record(line, "")
                ident = record.get("id") if isinstance(record, dict) else None
                if isinstance(record, dict) and not (type(ident) in (str, int) and str(ident).strip()):
                    raise ValueError("id: expected a non-empty string")
                task = task_from_record(record, server, tools)
                if task.id in seen:
                    raise ValueError(f"id: {task.id!r:.80} repeats an earlier task's")
                seen.add(task.id)
                report.tasks.append(task)
            except (SchemaError, ValueError) as e:
                report.rejected.append((lineno, str(e)))
    return report


def check_task_file(path: str, server: str | McpServer, settings: McpSettings | None = None) -> McpTaskReport:
    """`check_tasks` against the live server: start it (or connect), list its tools, check, stop it.
    Raises `McpUnavailable` when the server cannot be used and ValueError for a malformed `server`."""
    settings = settings or McpSettings()
    server = McpServer.parse(server, "--server")
    conn = McpConnection(server, settings.start_seconds, settings.call_seconds, settings.message_bytes)
    try:
        tools = conn.list_tools()
    finally:
        conn.close()
    report = check_tasks(path, server, tools)
    report.tools_cut = conn.list_cut
    return report
