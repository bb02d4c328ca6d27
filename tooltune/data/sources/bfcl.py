"""BFCL (Berkeley Function Calling Leaderboard) single-turn data, as shipped in the `bfcl-eval` package.

Files: `bfcl_eval/data/BFCL_v4_<category>.json` (JSONL of {"id", "question": [[messages]], "function"})
and `possible_answer/BFCL_v4_<category>.json` ({"id", "ground_truth": [{func: {arg: [acceptable...]}}]}).
The data folder is located with `importlib.util.find_spec` so `bfcl_eval` is never imported (its import
creates folders and loads every model handler).

The sample's answer takes the first acceptable value of each argument; optional arguments whose
acceptable list contains "" are omitted; `dict` arguments (and lists of dicts) hold nested
acceptable-value maps, resolved the same way, as the official `dict_checker` reads them. The full
lists stay in `meta["acceptable"]` for the official checker. Multi-turn, memory and web-search entries
are scored by executing state, not by call lists, so they are rejected here with a reason.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from tooltune.data.sources.base import (
    DataFileError,
    Position,
    RawRecord,
    RecordError,
    Rejection,
    make_sample,
    tools_from_list,
)
from tooltune.data.sources.reading import iter_with_answers, unpack_entry
from tooltune.schema import Sample, ToolCall

NAME = "bfcl"
REQUIRED_FIELDS = ("id", "question")
_FILE_RE = re.compile(r"^BFCL_v\d+_(?P<cat>[a-z_]+)\.json$")
CATEGORY_MAP = {
    "simple_python": "simple",
    "simple_java": "simple",
    "simple_javascript": "simple",
    "live_simple": "simple",
    "multiple": "multiple",
    "live_multiple": "multiple",
    "parallel": "parallel",
    "live_parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "live_parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
    "live_irrelevance": "irrelevance",
}
NOT_RECORD_FILES = ("format_sensitivity",)  # an id index, not entries


def package_data_dir() -> str:
    """`bfcl_eval/data` of the installed package, found without importing it."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise DataFileError(
            "bfcl: the bfcl-eval package is not installed (pip install bfcl-eval==2026.3.23 "
            "--no-deps), or pass a BFCL data folder/file with --input"
        )
    return os.path.join(list(spec.submodule_search_locations)[0], "data")


def data_files(spec: str | None) -> list[str]:
    """BFCL entry files for `spec`: None/"package" = the installed package, a folder, or one file."""
    root = package_data_dir() if spec in (None, "", "package", "bfcl") else spec
    if os.path.isfile(root):
        return [root]
    if not os.path.isdir(root):
        raise DataFileError(f"{root}: no such BFCL data file or folder")
    out = []
    for name in sorted(os.listdir(root)):
        m = _FILE_RE.match(name)
        if m and m.group("cat") not in NOT_RECORD_FILES:
            out.append(os.path.join(root, name))
    return out


def category_of(path: str) -> str:
    m = _FILE_RE.match(os.path.basename(path))
    if not m:
        raise DataFileError(f"{path}: not a BFCL data file name (expected BFCL_v4_<category>.json)")
    return m.group("cat")


def read(spec: str | None, split: str = "train", lenient: bool = False) -> Iterator[RawRecord]:
    for path in data_files(spec):
        yield from iter_with_answers(path, category_of(path), REQUIRED_FIELDS, lenient)


def is_multi_turn(raw: Any) -> bool:
    return isinstance(raw, Mapping) and str(raw.get("category", "")).startswith("multi_turn")


def resolve(value_options: list[Any], param_schema: Mapping[str, Any] | None) -> tuple[bool, Any]:
    """(present, value): the first acceptable value of one argument; absent if "" is acceptable."""
    if "" in value_options:
        return False, None
    if not value_options:
        return False, None
    first = value_options[0]
    ptype = str((param_schema or {}).get("type", "")).lower()
    if ptype == "dict" and isinstance(first, Mapping):
        return True, _resolve_map(first, (param_schema or {}).get("properties") or {})
    items = (param_schema or {}).get("items") or {}
    if (
        ptype in ("array", "list", "tuple")
        and str(items.get("type", "")).lower() == "dict"
        and isinstance(first, list)
        and all(isinstance(x, Mapping) for x in first)
    ):
        return True, [_resolve_map(x, items.get("properties") or {}) for x in first]
    return True, first


def _resolve_map(options: Mapping[str, Any], props: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, opts in options.items():
        present, v = resolve(opts if isinstance(opts, list) else [opts], props.get(k))
        if present:
            out[k] = v
    return out


def convert(raw: Any, pos: Position) -> list[Sample | Rejection]:
    entry, cat, gt, rid = unpack_entry(raw)
    if cat == "live_relevance":
        raise RecordError(
            "no_ground_truth",
            "ground_truth",
            "live_relevance accepts any call; there is no single answer to train on",
        )
    if cat not in CATEGORY_MAP:
        raise RecordError(
            "unsupported_category",
            "id",
            f"BFCL category {cat!r} is scored by execution, "
            "not by call lists (the evaluation harness handles it)",
        )
    question = entry.get("question")
    if not (isinstance(question, list) and len(question) == 1 and isinstance(question[0], list)):
        raise RecordError("bad_field_type", "question", "expected [[messages]] with one turn")
    functions = entry.get("function")
    tools = tools_from_list(functions, "function")
    if CATEGORY_MAP[cat] == "irrelevance":
        answer: list[ToolCall] = []
        acceptable = None
    else:
        if gt is None:
            raise RecordError("no_ground_truth", "ground_truth", "no possible_answer entry for this id")
        answer, acceptable = _answer(gt, functions)
    return [
        make_sample(
            NAME,
            rid,
            question[0],
            tools,
            answer,
            {"raw_id": rid, "bfcl_category": cat, "acceptable": acceptable},
            CATEGORY_MAP[cat],
        )
    ]


def _answer(gt: Any, functions: Any) -> tuple[list[ToolCall], Any]:
    if not isinstance(gt, list):
        raise RecordError(
            "answer_schema_error", "ground_truth", "expected a list of {function: {arg: [...]}}"
        )
    schemas = {f.get("name"): f.get("parameters") or {} for f in functions if isinstance(f, Mapping)}
    calls = []
    for i, item in enumerate(gt):
        if not isinstance(item, Mapping) or len(item) != 1:
            raise RecordError(
                "answer_schema_error", f"ground_truth[{i}]", "expected one {function: args} object"
            )
        ((name, args),) = item.items()
        if not isinstance(args, Mapping):
            raise RecordError("answer_schema_error", f"ground_truth[{i}].{name}", "expected an object")
        props = (schemas.get(name) or {}).get("properties") or {}
        resolved = {}
        for k, opts in args.items():
            if not isinstance(opts, list):
                raise RecordError(
                    "answer_schema_error",
                    f"ground_truth[{i}].{name}.{k}",
                    "expected a list of acceptable values",
                )
            present, v = resolve(opts, props.get(k))
            if present:
                resolved[k] = v
        calls.append(ToolCall(name=name, arguments=resolved))
    return calls, gt
