"""Offline, seeded synthetic tool-calling data.

Two profiles:
- `general` (re-exported here): realistic tools of every JSON-Schema type in every category, written
  as canonical samples or as raw xLAM / ToolACE records (`tools` holds the catalog, `values` the
  value kinds);
- `quickstart_task`: the quickstart's task, built so that RL has something to fix on a tiny model
  (copy-cheap values, decision errors, imperfect demonstrations under an exact ground truth;
  `quickstart_catalog` holds its tools).
"""

from tooltune.data.synthetic.general import (
    FORMATS,
    JOINERS,
    NO_TOOL_REPLY,
    SINGLE_STEP,
    TOOLACE_SYSTEM,
    WRAPPERS,
    SynthConfig,
    Task,
    generate,
    iter_tasks,
    make_task,
    to_canonical,
    to_toolace,
    to_xlam,
    write,
    xlam_tool,
)

__all__ = [
    "FORMATS",
    "JOINERS",
    "NO_TOOL_REPLY",
    "SINGLE_STEP",
    "TOOLACE_SYSTEM",
    "WRAPPERS",
    "SynthConfig",
    "Task",
    "generate",
    "iter_tasks",
    "make_task",
    "to_canonical",
    "to_toolace",
    "to_xlam",
    "write",
    "xlam_tool",
]
