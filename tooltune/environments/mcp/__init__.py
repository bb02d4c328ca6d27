"""The `mcp` environment: the tools of any Model Context Protocol server as a training environment.

The modules, from the episode down to the bytes:

- `environment`: `McpEnvironment` (tasks, steps, outcome checks) and its settings, `McpSettings`;
- `task`: an ``mcp`` task read and checked (`read_task`), a call checked against a tool's input schema
  (`check_call`);
- `client`: `McpConnection`, one session with one server through the official SDK, and the pool of
  idle connections;
- `stdio` and `http`: the two transports (a command started as a process group, a streamable HTTP
  endpoint); `wire`: a server's messages split and capped while they are read; `schema`: tools whose
  input schema cannot be checked safely are left out; `reaper`: the watchdog process that ends the
  servers' process groups when tooltune is killed;
- `data`: where a server is (`McpServer`) and what a call returned (`McpResult`);
- `notes`: a small MCP server of notes (``python -m tooltune.environments.mcp.notes``) for tests and
  examples.
"""

from tooltune.environments.mcp.client import McpConnection, McpUnavailable
from tooltune.environments.mcp.data import McpResult, McpServer
from tooltune.environments.mcp.environment import ENVIRONMENT, McpEnvironment, McpSettings
from tooltune.environments.mcp.task import check_call, read_task

__all__ = [
    "ENVIRONMENT",
    "McpConnection",
    "McpEnvironment",
    "McpResult",
    "McpServer",
    "McpSettings",
    "McpUnavailable",
    "check_call",
    "read_task",
]
