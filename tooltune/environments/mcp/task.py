"""An `mcp` task's ``meta["env"]`` read and checked (`read_task`), and a call checked against a tool's
JSON-Schema input schema (`check_call`); the fields are documented in
`tooltune.environments.mcp.environment`."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from tooltune.environments.mcp.data import McpServer, parse_argv
from tooltune.environments.mcp.schema import validator as schema_validator
from tooltune.schema import ToolCall, ToolSpec, calls_from_any

logger = logging.getLogger(__name__)

RESTART, NO_RESET, FRESH_DIR = "restart", "none", "fresh_dir"
CHECK_KINDS = ("calls", "result", "answer")


@dataclass(frozen=True)
class Check:
    """One outcome check of a task (the kinds: `tooltune.environments.mcp.environment`)."""

    kind: str
    calls: tuple[ToolCall, ...] = ()
    call: ToolCall | None = None
    equals: Any = None
    contains: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class McpTask:
    """A task's ``meta["env"]``, read and checked (`read_task`)."""

    server: McpServer
    reset: str | ToolCall
    setup: tuple[ToolCall, ...]
    checks: tuple[Check, ...]
    prepare: tuple[str, ...] = ()

    @property
    def restarts(self) -> bool:
        """Whether every episode starts its own server process (``restart`` and ``fresh_dir``)."""
        return self.reset in (RESTART, FRESH_DIR)

    def server_calls(self) -> list[tuple[str, ToolCall]]:
        """Every call the task itself makes on the server, with where it is written."""
        out = [("reset", self.reset)] if isinstance(self.reset, ToolCall) else []
        out += [(f"setup[{i}]", c) for i, c in enumerate(self.setup)]
        for i, ch in enumerate(self.checks):
            out += [(f"check[{i}].calls[{j}]", c) for j, c in enumerate(ch.calls)]
            out += [(f"check[{i}].call", ch.call)] if ch.call is not None else []
        return out


def check_call(call: ToolCall, spec: ToolSpec) -> str | None:
    """Why `call`'s arguments do not fit `spec`'s input schema, or None: an argument the schema's
    properties do not name, else the first violation a JSON-Schema validator finds (required arguments,
    types, enums, bounds, nested objects and arrays; ``format`` and ``pattern`` are not asserted: the
    server checks them). Give it arguments that passed `check_literals` (plain JSON of a bounded size)."""
    params = spec.parameters if isinstance(spec.parameters, dict) else {}
    props = params.get("properties") or {}
    unknown = sorted(set(call.arguments) - set(props))
    if unknown:
        return f"{call.name}: unknown argument(s) {unknown}; expected some of {sorted(props)}"
    import jsonschema  # deferred: comes with mcp

    validator = schema_validator(json.dumps(params, sort_keys=True))
    if validator is None:
        return None
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(call.arguments))
    except Exception as e:
        # a schema the listing let through that still cannot be applied (a reference the validator
        # cannot follow): the call goes to the server, which checks its own arguments
        logger.warning("%s: arguments not checked against the input schema (%s)", call.name, type(e).__name__)
        return None
    if error is None:
        return None
    path = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
    return f"{call.name}: argument {path}: {error.message}"[:300]


def _check(raw: Any, where: str) -> Check:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object with a kind, got {type(raw).__name__}")
    kind = raw.get("kind")
    fields_of = {"calls": {"calls"}, "result": {"call", "equals"}, "answer": {"contains"}}
    optional = {"calls": {"ignore"}}
    if kind not in fields_of:
        raise ValueError(f"{where}.kind: expected one of {list(CHECK_KINDS)}, got {kind!r:.80}")
    extra = sorted(set(raw) - fields_of[kind] - optional.get(kind, set()) - {"kind"})
    missing = sorted(fields_of[kind] - set(raw))
    if extra or missing:
        raise ValueError(f"{where}: a {kind} check has {sorted(fields_of[kind] | optional.get(kind, set()))}"
                         + (f"; unknown {extra}" if extra else "")
                         + (f"; missing {missing}" if missing else ""))
    if kind == "calls":
        calls = calls_from_any(raw["calls"], f"{where}.calls")
        ignore = raw.get("ignore") or []
        if not (isinstance(ignore, list) and all(isinstance(n, str) for n in ignore)):
            raise ValueError(f"{where}.ignore: expected a list of tool names")
        return Check(kind, calls=tuple(calls), ignore=tuple(ignore))
    if kind == "result":
        if not isinstance(raw["call"], dict):
            raise ValueError(f"{where}.call: expected one call object")
        return Check(kind, call=ToolCall.from_dict(raw["call"], f"{where}.call"), equals=raw["equals"])
    texts = raw["contains"]
    if not (isinstance(texts, list) and texts and all(isinstance(t, str) and t.strip() for t in texts)):
        raise ValueError(f"{where}.contains: expected a non-empty list of non-empty strings")
    return Check(kind, contains=tuple(texts))


def read_task(spec: dict[str, Any], default_server: str = "") -> McpTask:
    """A task's ``meta["env"]`` as an `McpTask`; ValueError (SchemaError) naming the field."""
    unknown = sorted(set(spec) - {"name", "server", "reset", "prepare", "setup", "check"})
    if unknown:
        raise ValueError(f"meta.env: unknown field(s) {unknown}; "
                         "expected server, reset, prepare, setup, check")
    raw_server = spec.get("server") or default_server
    if not raw_server:
        raise ValueError("meta.env.server: missing (and the mcp environment has no default server)")
    server = McpServer.parse(raw_server, "meta.env.server")
    reset = spec.get("reset", RESTART if server.command else None)
    if isinstance(reset, dict):
        if set(reset) - {"tool", "arguments"} or not isinstance(reset.get("tool"), str):
            raise ValueError('meta.env.reset: expected "restart", "none" or '
                             '{"tool": name, "arguments": {...}}')
        reset = ToolCall.from_dict({"name": reset["tool"], "arguments": reset.get("arguments") or {}},
                                   "meta.env.reset")
    elif reset not in (RESTART, FRESH_DIR, NO_RESET):
        raise ValueError('meta.env.reset: a server at a URL cannot be restarted: name a reset tool '
                         '({"tool": name, "arguments": {...}}) or "none"' if server.url and reset is None
                         else f'meta.env.reset: expected "restart", "fresh_dir", "none" or a tool, '
                              f'got {reset!r:.80}')
    if reset in (RESTART, FRESH_DIR) and server.url:
        raise ValueError(f'meta.env.reset: "{reset}" needs a command server; '
                         'a URL needs a reset tool or "none"')
    prepare = parse_argv(spec.get("prepare") or (), "meta.env.prepare")
    if prepare and reset != FRESH_DIR:
        raise ValueError('meta.env.prepare: runs in the fresh folder of reset "fresh_dir" only')
    setup = tuple(calls_from_any(spec.get("setup") or [], "meta.env.setup"))
    raw_checks = spec.get("check")
    if raw_checks is None:
        raise ValueError("meta.env.check: missing (how the outcome is judged)")
    raw_checks = raw_checks if isinstance(raw_checks, list) else [raw_checks]
    if not raw_checks:
        raise ValueError("meta.env.check: empty")
    checks = tuple(_check(c, f"meta.env.check[{i}]") for i, c in enumerate(raw_checks))
    return McpTask(server, reset, setup, checks, prepare)
