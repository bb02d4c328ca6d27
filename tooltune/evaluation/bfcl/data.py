"""BFCL's entries: the categories and their groups, the entries and ground truths as bfcl-eval's own loader
gives them, and their tools and samples for prompt rendering.

`bfcl_eval` creates `result/`, `score/` and `.file_locks/` under `BFCL_PROJECT_ROOT` when imported and
loads every model handler, so it is imported lazily and only after `bfcl_environment()` pointed that
variable at a scratch folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tooltune.config import ConfigError, unknown_name
from tooltune.data.sources.types import tool_spec_from_source
from tooltune.environments.bfcl import bfcl_environment
from tooltune.evaluation.bfcl.truth import single_turn_calls
from tooltune.schema import Sample, ToolCall, ToolSpec

NON_LIVE_AST = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
                "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
SINGLE_TURN_AST = NON_LIVE_AST + LIVE_AST
RELEVANCE = ("irrelevance", "live_irrelevance", "live_relevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
MEMORY = ("memory_kv", "memory_vector", "memory_rec_sum")
WEB_SEARCH = ("web_search_base", "web_search_no_snippet")
"""BFCL's web-search categories: they need SerpAPI and live web pages, so they never run here."""
ALL_CATEGORIES = SINGLE_TURN_AST + RELEVANCE + MULTI_TURN + MEMORY


def _label(config: str) -> str:
    """`fs_<return format>[_tag]_doc_<function doc format>[_markdown][_experimental]`."""
    p = dict(kv.split("=", 1) for kv in config.split("&"))
    label = f"fs_{p['ret_fmt']}{'_tag' if p['tool_call_tag'] == 'True' else ''}_doc_{p['func_doc_fmt']}"
    return label + ("_markdown" if p["prompt_fmt"] == "markdown" else "") + \
        ("_experimental" if p["style"] == "experimental" else "")


def _configs() -> dict[str, str]:
    out = {}
    for ret in ("python", "json", "verbose_xml", "concise_xml"):
        for tag in ("True", "False"):
            for doc in ("python", "xml", "json"):
                c = f"ret_fmt={ret}&tool_call_tag={tag}&func_doc_fmt={doc}&prompt_fmt=plaintext&style=classic"
                out[_label(c)] = c
    for c in ("ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=markdown&style=classic",
              "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=experimental"):
        out[_label(c)] = c
    return out


FORMAT_SENSITIVITY_CONFIGS: dict[str, str] = _configs()
"""Format sensitivity's 26 prompt configurations, each a category: label -> BFCL's configuration string,
in BFCL's order (`get_all_format_sensitivity_configs` of bfcl-eval 2026.3.23)."""
FORMAT_SENSITIVITY = tuple(FORMAT_SENSITIVITY_CONFIGS)
CATEGORY_GROUPS = {"all": ALL_CATEGORIES, "single_turn": SINGLE_TURN_AST + RELEVANCE, "ast": SINGLE_TURN_AST,
                   "non_live": NON_LIVE_AST + ("irrelevance",), "live": LIVE_AST + RELEVANCE[1:],
                   "relevance": RELEVANCE, "multi_turn": MULTI_TURN, "memory": MEMORY, "agentic": MEMORY,
                   "format_sensitivity": FORMAT_SENSITIVITY}
"""Groups of categories; `all` is BFCL's scoring categories that run offline (format sensitivity, which BFCL
reports beside the score, runs when named); `agentic` is BFCL's agentic group without web search."""

NAME_STYLES = {"dotted": "qwen3-8b", "underscore": "qwen3-8b-FC"}
"""How dotted function names (`math.factorial`) are shown to the model and expected back, mapped to a
registered BFCL model key whose `underscore_to_dot` flag makes the checker expect exactly that."""

IMPOSSIBLE_ENTRIES = ("live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_862-181-3",
                      "live_multiple_964-207-0", "simple_java_36", "simple_java_65")
"""Entries no output passes under bfcl-eval 2026.3.23: the four live ground truths contradict their
function documents (a required argument missing, a string for an array, an undeclared argument); the
two Java ones expect an `ArrayList<any>` holding ints/booleans, but the checker converts every element
of such a list to a string."""

_SAMPLE_CATEGORY = {"simple": "simple", "multiple": "multiple", "parallel_multiple": "parallel_multiple",
                    "parallel": "parallel", "irrelevance": "irrelevance", "relevance": "multiple"}


def expand_categories(spec: str | Iterable[str] | None) -> list[str]:
    """'a,b' or a list of categories / group names (all, single_turn, ast, live, multi_turn, ...)."""
    items = ["all"] if spec is None else spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for item in (i.strip() for i in items if i.strip()):
        names = CATEGORY_GROUPS.get(item, (item,))
        for name in names:
            if name in WEB_SEARCH:
                raise ConfigError(f"categories: {name} needs SerpAPI and live web pages (internet access): "
                                  "it cannot run offline, and tooltune does not run it")
            if name not in ALL_CATEGORIES + FORMAT_SENSITIVITY:
                raise unknown_name("categories", "BFCL category", name, [*ALL_CATEGORIES, *CATEGORY_GROUPS])
            if name not in out:
                out.append(name)
    return out


@dataclass
class BfclEntry:
    """One BFCL test entry as the official loader gives it, plus its ground truth.

    `entry` is what the model is shown (function docs with BFCL's language hints); `functions` are the
    docs without hints, which is what the official runner hands to the checker.
    """

    id: str
    category: str
    entry: dict[str, Any]
    ground_truth: Any = None
    functions: list[dict[str, Any]] | None = None


def load_entries(categories: Iterable[str]) -> list[BfclEntry]:
    """Entries of `categories` through bfcl_eval's own loader (language hints, multi-turn function docs)."""
    bfcl_environment()
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    out = []
    for cat in categories:
        entries = load_dataset_entry(cat, include_prereq=False)
        if cat in MEMORY:  # questions only (the prerequisite conversations: `memory.load_memory`)
            truths = {t["id"].replace("memory", cat, 1): t["ground_truth"]
                      for t in load_ground_truth_entry(cat)}
            out += [BfclEntry(e["id"], cat, e, truths[e["id"]], e.get("function")) for e in entries]
            continue
        # The checker gets the docs without hints (hints retype Java/JS parameters); multi-turn needs none.
        plain = entries if cat in MULTI_TURN else load_dataset_entry(
            cat, include_prereq=False, include_language_specific_hint=False)
        truths = [None] * len(entries) if cat in RELEVANCE[:2] or cat == "live_relevance" \
            else load_ground_truth_entry(cat)
        if len(truths) != len(entries):
            raise ValueError(f"bfcl {cat}: {len(entries)} entries but {len(truths)} ground truths")
        for e, p, t in zip(entries, plain, truths):
            truth = None if t is None else t["ground_truth"]
            out.append(BfclEntry(e["id"], cat, e, truth, p.get("function")))
    return out


def rename_dotted(name: str, name_style: str) -> str:
    return name.replace(".", "_") if name_style == "underscore" else name


def entry_tools(functions: Iterable[Mapping[str, Any]], name_style: str = "dotted") -> list[ToolSpec]:
    tools = []
    for i, f in enumerate(functions):
        spec = tool_spec_from_source(f, where=f"function[{i}]")
        tools.append(ToolSpec(rename_dotted(spec.name, name_style), spec.description, spec.parameters))
    return tools


def entry_sample(e: BfclEntry, name_style: str = "dotted") -> Sample:
    """A tooltune `Sample` holding a single-turn entry's question and tools (for prompt rendering)."""
    kind = next((k for k in ("irrelevance", "relevance", "parallel_multiple", "parallel", "multiple")
                 if k in e.category), "simple")
    return Sample(id=e.id, source="bfcl", category=_SAMPLE_CATEGORY[kind], messages=e.entry["question"][0],
                  tools=entry_tools(e.entry["function"], name_style), answer=[],
                  meta={"bfcl_category": e.category})


def ground_truth_calls(e: BfclEntry, name_style: str = "dotted") -> list[ToolCall]:
    """What a perfect model answers for a single-turn entry (see `truth.single_turn_calls`)."""

    calls = single_turn_calls(e.ground_truth, e.functions or e.entry["function"], e.category)
    return [ToolCall(rename_dotted(c.name, name_style), c.arguments) for c in calls]



def data_files(categories: Iterable[str]) -> list[str]:
    """The package's data and possible-answer files of `categories` (for the manifest's hashes)."""

    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("bfcl-eval is not installed "
                           "(pip install --no-deps -r requirements/bfcl-nodeps.txt)")
    root = os.path.join(list(spec.submodule_search_locations)[0], "data")
    out = []
    if any(c in FORMAT_SENSITIVITY for c in categories):
        ids = os.path.join(root, "BFCL_v4_format_sensitivity.json")
        with open(ids, encoding="utf-8") as f:
            categories = [*categories, *json.load(f)]
        out.append(ids)
    for c in categories:
        if c in MEMORY:
            prereq = os.path.join(root, "memory_prereq_conversation")
            out += [os.path.join(root, "BFCL_v4_memory.json"),
                    os.path.join(root, "possible_answer", "BFCL_v4_memory.json"),
                    *sorted(os.path.join(prereq, f) for f in os.listdir(prereq)),
                    os.path.join(root, "multi_turn_func_doc", f"{c}.json")]
            continue
        for folder in (root, os.path.join(root, "possible_answer")):
            path = os.path.join(folder, f"BFCL_v4_{c}.json")
            if os.path.exists(path) and path not in out:
                out.append(path)
    return out
