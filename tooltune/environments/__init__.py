"""Executable tool environments: tools, an initial state, a safe step per call, an outcome check.

`make_environment(name, settings)` builds a registered environment (`settings`: the settings objects of
environments that take some, by name); `environment_of(task)` reads which one a task asks for. The
contract and how to add one: `tooltune.environments.base` and docs/environments.md.
"""

from tooltune.environments import acebench, bfcl, mcp, synthetic  # noqa: F401  (they register themselves)
from tooltune.environments.base import (
    ENVIRONMENTS,
    Environment,
    EnvironmentSettings,
    Outcome,
    TaskError,
    ToolResult,
    environment_of,
    make_environment,
    register_environment,
)

__all__ = [
    "ENVIRONMENTS",
    "Environment",
    "EnvironmentSettings",
    "Outcome",
    "TaskError",
    "ToolResult",
    "environment_of",
    "make_environment",
    "register_environment",
]
