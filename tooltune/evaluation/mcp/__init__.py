"""MCP tasks as a benchmark: a model's episode success on the tasks of MCP servers (``tooltune eval mcp``).

The package has the inner layout every benchmark package of `tooltune.evaluation` shares (a family has
only the modules it needs):

- `benchmark`: the registered `Benchmark` (`McpBenchmark`: prepare, the episodes, the self-check, summary);
- `data`: the task files and their tasks.

The verdict is the `mcp` environment's outcome (`tooltune.environments.mcp`), so there is no official
checker to bridge to. The names below are the family's public ones (`from tooltune.evaluation import mcp`).
"""

from tooltune.evaluation.mcp.data import McpEntry, load_entries, task_files

__all__ = ["McpEntry", "load_entries", "task_files"]
