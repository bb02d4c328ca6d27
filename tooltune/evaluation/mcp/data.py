"""MCP task files and their tasks: the folder ``--data-dir DIR`` (or ``$TOOLTUNE_DATA_DIR/mcp``) holds task
files, ``NAME.jsonl``, as ``tooltune data tasks mcp`` writes them (canonical samples whose ``meta["env"]``
is an ``mcp`` task, checked against the live server); each file is one category, named by its stem.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tooltune.environments.mcp import ENVIRONMENT
from tooltune.schema import Sample, SchemaError, read_jsonl


@dataclass
class McpEntry:
    """One task of one task file (its stem is the category)."""

    id: str
    category: str
    sample: Sample


def task_files(data_dir: Path, categories: Sequence[str] | None = None) -> list[Path]:
    """The task files of `categories` (None: every ``*.jsonl`` in `data_dir`); ValueError naming a
    category without its file."""
    if categories is None:
        files = sorted(data_dir.glob("*.jsonl"))
        if not files:
            raise ValueError(f"mcp: no task files (*.jsonl, as `tooltune data tasks mcp` writes them) "
                             f"in {data_dir}")
        return files
    missing = [c for c in categories if not (data_dir / f"{c}.jsonl").is_file()]
    if missing:
        known = sorted(p.stem for p in data_dir.glob("*.jsonl"))
        raise ValueError(f"mcp: no task file for {missing} in {data_dir} (task files: {known})")
    return [data_dir / f"{c}.jsonl" for c in categories]


def load_entries(data_dir: Path, categories: Sequence[str] | None = None) -> list[McpEntry]:
    """Every task of the task files, checked to be an ``mcp`` task; SchemaError naming the file and
    task that is not."""
    entries = []
    for path in task_files(data_dir, categories):
        for sample in read_jsonl(str(path)):
            env = sample.meta.get("env")
            if not isinstance(env, dict) or env.get("name") != ENVIRONMENT:
                raise SchemaError(f"{path}: task {sample.id!r} is not an mcp task (meta.env.name must be "
                                  f"{ENVIRONMENT!r}); write task files with `tooltune data tasks mcp`")
            entries.append(McpEntry(sample.id, path.stem, sample))
    return entries
