"""ACEBench's (English) data files and their entries: normal and special entries as samples through the
data source adapter, agent entries (agent_multi_step, agent_multi_turn) with their ground truth.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune.data.sources import get_source
from tooltune.data.sources.base import describe
from tooltune.data.sources.reading import iter_file
from tooltune.evaluation.bfcl.data import entry_tools
from tooltune.schema import Sample, SchemaError, ToolSpec

AGENT_CATEGORIES = ("agent_multi_step", "agent_multi_turn")


def categories_in(data_dir: str | os.PathLike) -> list[str]:
    names = sorted(p.name[5:-5] for p in Path(data_dir).glob("data_*.json"))
    if not names:
        raise FileNotFoundError(f"no ACEBench data_<category>.json files in {data_dir}")
    return names


def load_samples(data_dir: str | os.PathLike, categories: Iterable[str]) -> list[tuple[str, Sample]]:
    """(category, Sample) for normal and special categories, through the data source adapter.

    Each sample's `meta["official"]` keeps what ACEBench's checker reads: the entry's `function` list
    (declared type names such as "number" or "object" as written) and its `possible_answer` ground truth
    (keys `func_1`, optional-parameter placeholders and alternatives as written)."""
    src = get_source("acebench")
    out = []
    for cat in categories:
        if cat.startswith("agent"):
            continue
        for rec in src.read(str(Path(data_dir) / f"data_{cat}.json")):
            raw = rec.data if isinstance(rec.data, Mapping) else {}
            entry = raw.get("entry") if isinstance(raw.get("entry"), Mapping) else {}
            for s in src.convert(rec.data, rec.position):
                if isinstance(s, Sample):
                    s.id = s.id.split(":", 1)[-1]
                    s.meta["official"] = {"function": entry.get("function"),
                                          "ground_truth": raw.get("ground_truth")}
                    out.append((cat, s))
    return out


def data_files(data_dir: str | os.PathLike, categories: Iterable[str]) -> list[str]:
    root = Path(data_dir)
    pairs = [(root / f"data_{c}.json", root / "possible_answer" / f"data_{c}.json") for c in categories]
    return [str(p) for pair in pairs for p in pair if p.exists()]


@dataclass
class AgentEntry:
    id: str
    category: str
    question: str
    functions: list[dict[str, Any]]
    initial_config: dict[str, Any]
    involved: list[str]
    ground_truth: list[dict[str, Any]]
    milestones: list[Any]

    @property
    def tools(self) -> list[ToolSpec]:

        return entry_tools(self.functions)


def load_agent_entries(data_dir: str | os.PathLike, categories: Iterable[str]) -> list[AgentEntry]:
    """Agent entries with their ground truth; a malformed line raises SchemaError naming it."""
    out = []
    for cat in [c for c in categories if c in AGENT_CATEGORIES]:
        path = Path(data_dir) / f"data_{cat}.json"
        apath = Path(data_dir) / "possible_answer" / f"data_{cat}.json"
        answers = {}
        for where, rec in _json_lines(apath):
            answers[str(rec.get("id"))] = (where, rec)
        for where, rec in _json_lines(path):
            try:
                ans = answers[str(rec["id"])][1]
                entry = AgentEntry(str(rec["id"]), cat, rec["question"], rec["function"],
                                   rec.get("initial_config") or {}, rec["involved_classes"],
                                   ans["ground_truth"], ans["mile_stone"])
            except KeyError as e:
                raise SchemaError(f"{where}: missing field {e.args[0]!r} (or its possible answer)") from None
            if not isinstance(entry.ground_truth, list) or not isinstance(entry.milestones, list):
                raise SchemaError(f"{where}: ground_truth and mile_stone must be lists")
            out.append(entry)
    return out


def _json_lines(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:

    for rec in iter_file(str(path), ("id",)):
        if not isinstance(rec.data, dict):
            raise SchemaError(f"{describe(rec.position)}: expected an object")
        yield describe(rec.position), rec.data
