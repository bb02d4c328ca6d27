"""What verl 0.9.1's agent loop reads to run tooltune environments: the tool config and the agentic row
fields. No verl import here: `tooltune data export --format verl` writes both without verl installed.

verl's `ToolAgentLoop` (``agent_name: tool_agent``) instantiates the tools of a YAML tool config
(`verl.tools.tool_registry.initialize_tools_from_config`: ``tools: [{class_name, config: {type: native,
...}, tool_schema: {type: function, function: {name, description, parameters}}}]``), offers a row the
tools named in its ``extra_info.tool_selection``, and for each parsed call runs ``create`` / ``execute`` /
``release`` on that tool, handing ``execute`` the trajectory's ``agent_data`` (whose ``tools_kwargs`` is
the row's ``extra_info.tools_kwargs``, as verl's `RLHFDataset` reads it).

`tool_config(tasks)` declares one `tooltune.integrations.verl.tools.EnvironmentTool` per tool name of
`tasks` (the first spec of a name wins), its ``config.environment`` the environment of the first task
offering it. verl's schema model keeps a parameter's ``type``, ``description`` and ``enum`` only, so the
rest of a parameter's schema (nested properties, items, bounds) is appended to its description as
compact JSON (`tooltune.integrations.signatures.schema_detail`), and a parameter without a ``type``
declares every JSON type; the environment checks calls against the full schema.

`agentic_fields(task)` are a task row's fields: ``agent_name`` ``tool_agent`` and, in ``extra_info``,
``tools_kwargs`` ``{"tooltune": {"create_kwargs": {"task": <the task's JSON line>}}}`` (one fixed key,
so the parquet schema is the same for every row whatever its tools; the tools read the task from the
trajectory's ``tools_kwargs``), ``tool_selection`` (the task's tool names) and ``need_tools_kwargs``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import yaml

from tooltune.environments import environment_of
from tooltune.integrations.signatures import schema_detail
from tooltune.schema import Sample, ToolSpec

logger = logging.getLogger(__name__)

TOOL_CLASS = "tooltune.integrations.verl.tools.EnvironmentTool"
"""The class path verl's tool config names."""
AGENT_NAME = "tool_agent"
"""verl's multi-turn tool agent loop."""
SINGLE_TURN_AGENT = "single_turn_agent"
"""verl's single-turn agent loop: rows of an agentic export that are not environment tasks."""
SESSION_KEY = "tooltune"
"""The ``tools_kwargs`` key holding a row's task."""
OUTCOME_FIELD = "tooltune_outcome"
"""The trajectory field (``agent_data.extra_fields``, reaching the reward as ``extra_info``) holding the
environment's outcome score after the latest step."""
JSON_TYPES = ["string", "number", "integer", "boolean", "array", "object", "null"]


def verl_parameters(parameters: Any) -> dict[str, Any]:
    """A tool's parameters as verl's `OpenAIFunctionParametersSchema` accepts them (module docstring)."""
    params = parameters if isinstance(parameters, dict) else {}
    props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
    out: dict[str, Any] = {}
    for name, schema in props.items():
        schema = schema if isinstance(schema, dict) else {}
        declared = schema.get("type")
        prop: dict[str, Any] = {"type": declared if isinstance(declared, (str, list)) else list(JSON_TYPES)}
        description = " ".join(str(schema.get("description") or "").split())
        detail = schema_detail(schema)
        if detail:
            description = f"{description} Schema: {detail}".strip()
        if description:
            prop["description"] = description
        if isinstance(schema.get("enum"), list):
            prop["enum"] = schema["enum"]
        out[str(name)] = prop
    required = [r for r in params.get("required") or [] if r in out]
    return {"type": "object", "properties": out, "required": required}


def tool_entry(spec: ToolSpec, environment: str) -> dict[str, Any]:
    """One tool of verl's tool config."""
    return {
        "class_name": TOOL_CLASS,
        "config": {"type": "native", "environment": environment},
        "tool_schema": {"type": "function", "function": {
            "name": spec.name, "description": " ".join(spec.description.split()) or f"The {spec.name} tool.",
            "parameters": verl_parameters(spec.parameters)}},
    }


def tool_config(tasks: Sequence[Sample]) -> dict[str, Any]:
    """verl's tool config for `tasks` (module docstring); TaskError names a task without an environment."""
    entries: dict[str, dict[str, Any]] = {}
    for task in tasks:
        env = environment_of(task)
        for spec in task.tools:
            if spec.name not in entries:
                entries[spec.name] = tool_entry(spec, env)
            elif entries[spec.name]["config"]["environment"] != env:
                logger.warning("tool %r is offered by %r and %r tasks: its config names %r", spec.name,
                               entries[spec.name]["config"]["environment"], env,
                               entries[spec.name]["config"]["environment"])
    return {"tools": list(entries.values())}


def write_tool_config(tasks: Sequence[Sample], path: str) -> int:
    """Write `tool_config(tasks)` as YAML to `path`; returns the number of tools."""
    config = tool_config(tasks)
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f, sort_keys=False, allow_unicode=True)
    return len(config["tools"])


def is_task(sample: Sample) -> bool:
    """Whether `sample` is an environment task (its ``meta["env"]`` names an environment)."""
    env = sample.meta.get("env")
    return isinstance(env, dict) and isinstance(env.get("name"), str)


def agentic_fields(sample: Sample) -> tuple[str, dict[str, Any]]:
    """(``agent_name``, the ``extra_info`` additions) of one row of an agentic export."""
    if not is_task(sample):
        return SINGLE_TURN_AGENT, {"tools_kwargs": {SESSION_KEY: None}, "tool_selection": [],
                                   "need_tools_kwargs": False}
    return AGENT_NAME, {"tools_kwargs": {SESSION_KEY: {"create_kwargs": {"task": sample.to_json()}}},
                        "tool_selection": [t.name for t in sample.tools], "need_tools_kwargs": True}


__all__ = ["AGENT_NAME", "OUTCOME_FIELD", "SESSION_KEY", "SINGLE_TURN_AGENT", "TOOL_CLASS", "agentic_fields",
           "is_task", "tool_config", "tool_entry", "verl_parameters", "write_tool_config"]
