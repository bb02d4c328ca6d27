"""BFCL's single-turn and relevance entries scored by the official checker of the `bfcl-eval` package,
and the leaderboard's summaries.

Only the decoding of this project's templates into BFCL's decoded form is ours
(`[{"func": {"arg": value}}]`, via `tooltune.parsing.parse_completion`); verdicts come from
`bfcl_eval`'s `ast_checker` (single-turn AST categories) and its relevance rule (irrelevance,
live_irrelevance: correct iff no call is decoded; live_relevance: correct iff any call is); multi-turn
entries are checked by its `multi_turn_checker` (see `multiturn` and `official`). A completion that cannot
be decoded is a failed entry whose error says why (except in irrelevance categories, where BFCL counts it
as "no call").

`bfcl_eval` creates `result/`, `score/` and `.file_locks/` under `BFCL_PROJECT_ROOT` when imported and
loads every model handler, so it is imported lazily and only after `bfcl_environment()` pointed that
variable at a scratch folder.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from tooltune.environments.bfcl import bfcl_environment
from tooltune.evaluation.bfcl.data import (
    LIVE_AST,
    MEMORY,
    MULTI_TURN,
    NAME_STYLES,
    NON_LIVE_AST,
    RELEVANCE,
    SINGLE_TURN_AST,
    BfclEntry,
)
from tooltune.evaluation.bfcl.format_sensitivity import FORMULAS as FORMAT_FORMULAS
from tooltune.evaluation.bfcl.format_sensitivity import summary as format_summary
from tooltune.evaluation.verdict import Verdict, category_accuracy
from tooltune.parsing import parse_completion
from tooltune.prompts import grammar_for

logger = logging.getLogger(__name__)




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
    "memory": "unweighted mean of memory_kv, memory_vector, memory_rec_sum",
    "web_search": "not run (needs internet: SerpAPI and live web pages); never computed here",
    "agentic": "unweighted mean of web_search and memory: needs web search, so never computed here",
    "overall": "BFCL v4 overall, 0.1 non_live + 0.1 live + 0.1 hallucination + 0.3 multi_turn + 0.4 agentic: "
               "needs web search, so never computed here",
    "overall_partial": "NOT the v4 overall: the leaderboard's formula with what did not run counted 0, as "
                       "bfcl-eval counts it (web search always; memory when not run), computed when "
                       "non_live, live, hallucination and multi_turn ran: 0.1 non_live + 0.1 live + "
                       "0.1 hallucination + 0.3 multi_turn + 0.4 * (0 + memory) / 2",
    "overall_ceiling": "the most overall_partial can reach: 0.8 with the memory categories run, else 0.6",
    **FORMAT_FORMULAS,
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

    An aggregate is None when one of its categories was not evaluated. Web search cannot run offline, so
    the agentic group and the v4 overall are always None; `overall_partial` is the leaderboard's formula
    with web search (and memory, when not run) counted 0, and `overall_ceiling` what it can reach.
    Format sensitivity (when run) is summarised beside the score (`format_sensitivity`), never in it.
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
    memory = _mean([acc(c) for c in MEMORY])
    parts = [non_live, live, hallucination, multi_turn]
    partial = ceiling = None
    if all(p is not None for p in parts):
        agentic = (0.0 + (memory or 0.0)) / 2  # web search never runs here: 0, as bfcl-eval counts it
        partial = 0.1 * non_live + 0.1 * live + 0.1 * hallucination + 0.3 * multi_turn + 0.4 * agentic  # type: ignore[operator]
        ceiling = 0.8 if memory is not None else 0.6
    return {
        "categories": cats,
        "leaderboard": {"non_live": non_live, "simple": simple, "live": live, "hallucination": hallucination,
                        "relevance": acc("live_relevance"), "multi_turn": multi_turn, "memory": memory,
                        "web_search": None, "agentic": None, "overall": None,
                        "overall_partial": partial, "overall_ceiling": ceiling},
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
        **({"format_sensitivity": fs} if (fs := format_summary(cats)) is not None else {}),
    }
