"""BFCL scored by the official checker of the `bfcl-eval` package.

Only the decoding of this project's templates into BFCL's decoded form is ours
(`[{"func": {"arg": value}}]`, via `tooltune.parsing.parse_completion`); verdicts come from
`bfcl_eval`'s `ast_checker` (single-turn AST categories), its relevance rule (irrelevance,
live_irrelevance: correct iff no call is decoded; live_relevance: correct iff any call is) and its
`multi_turn_checker` (see `bfcl_multiturn`). A completion that cannot be decoded is a failed entry
whose error says why (except in irrelevance categories, where BFCL counts it as "no call").

`bfcl_eval` creates `result/`, `score/` and `.file_locks/` under `BFCL_PROJECT_ROOT` when imported and
loads every model handler, so it is imported lazily and only after `bfcl_environment()` pointed that
variable at a scratch folder.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tooltune.config import unknown_name
from tooltune.data.sources.types import tool_spec_from_source
from tooltune.environments.bfcl import bfcl_environment
from tooltune.evaluation.bfcl_truth import single_turn_calls
from tooltune.evaluation.verdict import Verdict, category_accuracy
from tooltune.parsing import parse_completion
from tooltune.prompts import grammar_for
from tooltune.schema import Sample, ToolCall, ToolSpec

logger = logging.getLogger(__name__)

NON_LIVE_AST = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
                "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
SINGLE_TURN_AST = NON_LIVE_AST + LIVE_AST
RELEVANCE = ("irrelevance", "live_irrelevance", "live_relevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
ALL_CATEGORIES = SINGLE_TURN_AST + RELEVANCE + MULTI_TURN
CATEGORY_GROUPS = {"all": ALL_CATEGORIES, "single_turn": SINGLE_TURN_AST + RELEVANCE, "ast": SINGLE_TURN_AST,
                   "non_live": NON_LIVE_AST + ("irrelevance",), "live": LIVE_AST + RELEVANCE[1:],
                   "relevance": RELEVANCE, "multi_turn": MULTI_TURN}

IMPOSSIBLE_ENTRIES = ("live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_862-181-3",
                      "live_multiple_964-207-0", "simple_java_36", "simple_java_65")
"""Entries no output passes under bfcl-eval 2026.3.23: the four live ground truths contradict their
function documents (a required argument missing, a string for an array, an undeclared argument); the
two Java ones expect an `ArrayList<any>` holding ints/booleans, but the checker converts every element
of such a list to a string."""

NAME_STYLES = {"dotted": "qwen3-8b", "underscore": "qwen3-8b-FC"}
"""How dotted function names (`math.factorial`) are shown to the model and expected back, mapped to a
registered BFCL model key whose `underscore_to_dot` flag makes the checker expect exactly that."""

_SAMPLE_CATEGORY = {"simple": "simple", "multiple": "multiple", "parallel_multiple": "parallel_multiple",
                    "parallel": "parallel", "irrelevance": "irrelevance", "relevance": "multiple"}


def expand_categories(spec: str | Iterable[str] | None) -> list[str]:
    """'a,b' or a list of categories / group names (all, single_turn, ast, live, multi_turn, ...)."""
    items = ["all"] if spec is None else spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for item in (i.strip() for i in items if i.strip()):
        names = CATEGORY_GROUPS.get(item, (item,))
        for name in names:
            if name not in ALL_CATEGORIES:
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
    """What a perfect model answers for a single-turn entry (see `bfcl_truth.single_turn_calls`)."""

    calls = single_turn_calls(e.ground_truth, e.functions or e.entry["function"], e.category)
    return [ToolCall(rename_dotted(c.name, name_style), c.arguments) for c in calls]


def decode(text: Any, template: str, mode: str = "strict") -> tuple[list[dict[str, Any]] | None, str | None]:
    """Completion text -> BFCL decoded form `[{name: {arg: value}}]`, or (None, reason)."""
    parsed = parse_completion(text, grammar_for(template), mode)
    if parsed.calls is None:
        return None, parsed.error or "no call block could be decoded"
    return [{c.name: dict(c.arguments)} for c in parsed.calls], None


def _error_text(result: Mapping[str, Any]) -> str:
    err = result.get("error") or result.get("error_message") or ""
    if isinstance(err, list):
        err = " ".join(str(x) for x in err)
    kind = result.get("error_type")
    return f"{kind}: {err}" if kind else str(err)


class SingleTurnScorer:
    """Scores single-turn and relevance entries with the official checker.

    `name_style` picks the checker's model key (see NAME_STYLES); `mode` is the parser's format mode.
    """

    def __init__(self, template: str = "tool_n1", mode: str = "strict", name_style: str = "dotted") -> None:
        if name_style not in NAME_STYLES:
            raise ValueError(f"name_style must be one of {sorted(NAME_STYLES)}, got {name_style!r}")
        bfcl_environment()
        from bfcl_eval.constants.enums import Language  # deferred: bfcl-eval loads every model handler
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # deferred: as above

        self.template, self.mode, self.name_style = template, mode, name_style
        self.model_key = NAME_STYLES[name_style].replace("/", "_")
        self._ast_checker, self._language = ast_checker, Language

    def language(self, category: str) -> Any:
        if category == "simple_java":
            return self._language.JAVA
        if category == "simple_javascript":
            return self._language.JAVASCRIPT
        return self._language.PYTHON

    def check_decoded(self, e: BfclEntry, decoded: list[dict[str, Any]]) -> Verdict:
        """The official verdict for already-decoded output (what BFCL's runner does after decoding)."""
        if e.category in RELEVANCE:
            has_call = bool(decoded) and not (len(decoded) == 1 and not decoded[0])
            if "irrelevance" in e.category:
                return Verdict(e.id, e.category, not has_call,
                               None if not has_call else "irrelevance_error:decoder_success: a call was made")
            return Verdict(e.id, e.category, has_call,
                           None if has_call else "relevance_error:decoder_failed: no call was made")
        functions = e.functions if e.functions is not None else e.entry["function"]
        result = self._ast_checker(functions, decoded, e.ground_truth, self.language(e.category),
                                   e.category, self.model_key)
        valid = bool(result["valid"])
        return Verdict(e.id, e.category, valid, None if valid else _error_text(result))

    def score(self, e: BfclEntry, text: Any) -> Verdict:
        """Decode `text` with the template's grammar and check it; never raises on model output."""
        if e.category not in SINGLE_TURN_AST + RELEVANCE:
            raise ValueError(f"{e.id}: {e.category} is not a single-turn category")
        decoded, why = decode(text, self.template, self.mode)
        if decoded is None:
            if "irrelevance" in e.category:  # BFCL: an undecodable answer is a no-call answer
                return Verdict(e.id, e.category, True)
            return Verdict(e.id, e.category, False, f"decode_failed: {why}")
        try:
            return self.check_decoded(e, decoded)
        except Exception as exc:  # the checker trips on some malformed values (e.g. unhashable types)
            logger.debug("checker raised on %s", e.id, exc_info=True)
            return Verdict(e.id, e.category, False, f"checker_error: {type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------------------------
# Summaries

FORMULAS = {
    "simple": "unweighted mean of simple_python, simple_java, simple_javascript",
    "non_live": "unweighted mean of simple, multiple, parallel, parallel_multiple",
    "live": "count-weighted mean of live_simple, live_multiple, live_parallel, live_parallel_multiple",
    "hallucination": "unweighted mean of irrelevance and live_irrelevance",
    "relevance": "live_relevance",
    "multi_turn": "unweighted mean of multi_turn_base, _miss_func, _miss_param, _long_context",
    "overall": "0.1 non_live + 0.1 live + 0.1 hallucination + 0.3 multi_turn + 0.4 agentic "
               "(agentic = web search + memory, not run here: counted 0 as the leaderboard does when absent)",
    "table2.overall": "Tool-N1 Table 2: mean of non_live and live",
    "r2if.non_live": "R2IF tables: non_live as above",
    "r2if.live": "R2IF tables: live as above",
    "r2if.irrelevance": "R2IF tables: the leaderboard's irrelevance detection, unweighted mean of "
                        "irrelevance and live_irrelevance (= hallucination)",
    "r2if.overall": "R2IF tables: unweighted mean of non_live, live and r2if.irrelevance",
}


def _mean(xs: list[float | None]) -> float | None:
    return None if any(x is None for x in xs) else sum(xs) / len(xs)  # type: ignore[arg-type]


def scores(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-category accuracy, the leaderboard's aggregates, the Tool-N1 Table 2 columns and the R2IF
    columns (non-live, live, irrelevance and their mean; see FORMULAS).

    An aggregate is None when one of its categories was not evaluated.
    """
    cats = category_accuracy(records)

    def acc(c: str) -> float | None:
        return cats[c]["accuracy"] if c in cats else None

    simple = _mean([acc(c) for c in NON_LIVE_AST[:3]])
    non_live = _mean([simple, acc("multiple"), acc("parallel"), acc("parallel_multiple")])
    live = None
    if all(c in cats for c in LIVE_AST):
        live = sum(cats[c]["correct"] for c in LIVE_AST) / sum(cats[c]["total"] for c in LIVE_AST)
    hallucination = _mean([acc("irrelevance"), acc("live_irrelevance")])
    multi_turn = _mean([acc(c) for c in MULTI_TURN])
    parts = [non_live, live, hallucination, multi_turn]
    overall = None if any(p is None for p in parts) else \
        0.1 * non_live + 0.1 * live + 0.1 * hallucination + 0.3 * multi_turn  # type: ignore[operator]
    return {
        "categories": cats,
        "leaderboard": {"non_live": non_live, "simple": simple, "live": live, "hallucination": hallucination,
                        "relevance": acc("live_relevance"), "multi_turn": multi_turn, "overall": overall},
        "table2": {
            "non_live": {"simple": simple, "multiple": acc("multiple"), "parallel": acc("parallel"),
                         "parallel_multiple": acc("parallel_multiple"), "overall": non_live},
            "live": {"simple": acc("live_simple"), "multiple": acc("live_multiple"),
                     "parallel": acc("live_parallel"), "parallel_multiple": acc("live_parallel_multiple"),
                     "overall": live},
            "overall": _mean([non_live, live]),
        },
        "r2if": {"non_live": non_live, "live": live, "irrelevance": hallucination,
                 "overall": _mean([non_live, live, hallucination])},
    }


def data_files(categories: Iterable[str]) -> list[str]:
    """The package's data and possible-answer files of `categories` (for the manifest's hashes)."""

    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("bfcl-eval is not installed "
                           "(pip install --no-deps -r requirements/bfcl-nodeps.txt)")
    root = os.path.join(list(spec.submodule_search_locations)[0], "data")
    out = []
    for c in categories:
        for folder in (root, os.path.join(root, "possible_answer")):
            path = os.path.join(folder, f"BFCL_v4_{c}.json")
            if os.path.exists(path):
                out.append(path)
    return out
