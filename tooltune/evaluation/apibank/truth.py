"""The ground truth of each API-Bank sample, read from the dialogue file it was cut from.

The official evaluator does not compare against `expected_output`: it rebuilds each dialogue's samples
(`Sample.from_chat_history`: for every API turn at position i, one sample ending before it, whose truth is
that API turn, and one ending after it, whose truth is turn i + 1) and compares the request's result with
the result recorded in the ground-truth API turn. A sample's `id` in `level-N-api.json` is its index in that
list. `Truth` keeps that turn and the API calls made earlier in the dialogue (the state the recorded result
was produced in, which the official evaluator does not replay).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

DIALOGUES = "lv1-lv2-samples"
FOLDERS = {"level-1": "level-1-given-desc", "level-2": "level-2-toolsearcher"}
"""The dialogue folder each level's samples were cut from (the official evaluator's `data_dir`)."""


@dataclass(frozen=True)
class Truth:
    """A sample's ground-truth API turn: name, arguments and recorded result, and the earlier API calls."""

    api_name: str
    arguments: dict[str, Any]
    result: dict[str, Any]
    earlier: list[list[Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Truth:
        return cls(data["api_name"], dict(data.get("arguments") or {}), dict(data["result"]),
                   [list(c) for c in data.get("earlier", [])])


def dialogue_folder(data_dir: str | os.PathLike, level: str) -> Path:
    return Path(data_dir) / DIALOGUES / FOLDERS[level]


def dialogue_files(data_dir: str | os.PathLike, levels: Any) -> list[str]:
    """Every dialogue file of `levels` (their results are what the official evaluator compares with)."""
    out = []
    for level in levels:
        folder = dialogue_folder(data_dir, level)
        if not folder.is_dir():
            raise FileNotFoundError(f"API-Bank dialogue folder not found: {folder}")
        out += sorted(str(p) for p in folder.glob("*.jsonl"))
    return out


@lru_cache(maxsize=1024)
def _turns(path: str) -> tuple[str, ...]:
    with open(path, encoding="utf-8") as f:
        return tuple(line for line in f if line.strip())


def truth_for(data_dir: str | os.PathLike, level: str, file: str, sample_id: int) -> Truth:
    """The ground truth of sample `sample_id` of dialogue `file`, as the official evaluator builds it."""
    path = dialogue_folder(data_dir, level) / Path(file).name
    history = [json.loads(line) for line in _turns(str(path))]
    samples = []
    for i, turn in enumerate(history):
        if turn.get("role") == "API":
            samples.append(i)
            if i + 1 < len(history):
                samples.append(i + 1)
    if not 0 <= sample_id < len(samples):
        raise ValueError(f"{path.name}: no sample {sample_id} ({len(samples)} samples)")
    at = samples[sample_id]
    turn = history[at]
    if turn.get("role") != "API":
        raise ValueError(f"{path.name}: sample {sample_id} is a {turn.get('role')} turn, not an API call")
    earlier = [[t["api_name"], t.get("param_dict") or {}] for t in history[:at] if t.get("role") == "API"]
    return Truth(turn["api_name"], turn.get("param_dict") or {}, turn["result"], earlier)
