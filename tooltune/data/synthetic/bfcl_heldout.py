"""The held-out rule for ``bfcl`` environment tasks: none may repeat a BFCL multi-turn evaluation entry.

BFCL's multi-turn entries (the installed ``bfcl_eval/data/BFCL_v*_multi_turn_*.json`` files and their
``possible_answer/`` ground truths) are for evaluation only. `heldout_overlaps` compares tasks with all
of them and names every task that shares with an entry:

- a request: the task's user message equals one of the entry's user turns (case and spacing ignored);
- an initial state: the task's ``initial_config`` equals the entry's;
- a ground truth: the task's calls (all steps, in order) equal the calls of one of the entry's turns
  or of the whole entry (BFCL's positional arguments are named from the function documents).

`check_heldout` raises when there is any overlap; `generate_bfcl_tasks` runs it on what it generates.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tooltune.environments.base import call_text
from tooltune.environments.bfcl import CLASSES, function_docs, package_data_dir
from tooltune.schema import Sample, ToolCall, calls_from_any


@dataclass(frozen=True)
class EvaluationEntries:
    """What the overlap test compares with: requests, initial states and call sequences of BFCL's entries."""

    count: int
    requests: frozenset[str]
    configs: frozenset[str]
    call_lists: frozenset[tuple[str, ...]]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _config_key(config: Any) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def parse_bfcl_call(text: str, params: dict[str, list[str]]) -> str:
    """A BFCL ground-truth call string (`f(1, b='x')`) as a `call_text`; the text itself when it is not a
    plain literal call. Only `ast.parse` and `ast.literal_eval` read it: nothing is evaluated."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            return text
        name = node.func.id
        args = {}
        for i, arg in enumerate(node.args):
            args[params.get(name, [])[i]] = ast.literal_eval(arg)
        for kw in node.keywords:
            if kw.arg is None:
                return text
            args[kw.arg] = ast.literal_eval(kw.value)
        return call_text(ToolCall(name, args))
    except (SyntaxError, ValueError, TypeError, IndexError, MemoryError, RecursionError):
        return text


@lru_cache(maxsize=1)
def evaluation_entries() -> EvaluationEntries:
    """BFCL's multi-turn evaluation entries, read from the installed bfcl-eval package's data files."""
    data = package_data_dir()
    params = {d["name"]: list((d.get("parameters") or {}).get("properties") or {})
              for cls in CLASSES for d in function_docs(cls)}
    requests, configs, call_lists, count = set(), set(), set(), 0
    files = sorted(data.glob("BFCL_v*_multi_turn_*.json"))
    if not files:
        raise FileNotFoundError(f"no BFCL multi-turn entries under {data}")
    for path in files:
        truths = {}
        answers = data / "possible_answer" / path.name
        if answers.exists():
            for line in answers.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    rec = json.loads(line)
                    truths[rec["id"]] = rec.get("ground_truth") or []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            count += 1
            for turn in entry.get("question") or []:
                requests.update(_norm(m.get("content") or "") for m in turn if m.get("role") == "user")
            configs.add(_config_key(entry.get("initial_config") or {}))
            turns = [[parse_bfcl_call(s, params) for s in turn] for turn in truths.get(entry["id"], [])]
            call_lists.update(tuple(t) for t in turns if t)
            call_lists.add(tuple(k for t in turns for k in t))
    return EvaluationEntries(count, frozenset(requests), frozenset(configs), frozenset(call_lists))


def heldout_overlaps(tasks: Iterable[Sample]) -> list[str]:
    """One line per task that shares a request, an initial state or a ground truth with a BFCL
    multi-turn evaluation entry (empty when none does)."""
    entries = evaluation_entries()
    found = []
    for t in tasks:
        spec = t.meta.get("env") or {}
        requests = [_norm(m.get("content") or "") for m in t.messages if m.get("role") == "user"]
        steps = spec.get("ground_truth") or []
        calls = tuple(call_text(c) for step in steps for c in calls_from_any(step))
        if any(r in entries.requests for r in requests):
            found.append(f"{t.id}: its request is a BFCL evaluation entry's")
        if _config_key(spec.get("initial_config") or {}) in entries.configs:
            found.append(f"{t.id}: its initial_config is a BFCL evaluation entry's")
        if calls and calls in entries.call_lists:
            found.append(f"{t.id}: its ground truth is a BFCL evaluation entry's")
    return found


def check_heldout(tasks: Iterable[Sample]) -> None:
    """Raise ValueError naming the tasks that overlap BFCL's multi-turn evaluation entries."""
    found = heldout_overlaps(tasks)
    if found:
        raise ValueError("tasks overlap BFCL's evaluation entries:\n" + "\n".join(found[:20]))
