"""ACEBench (English): normal and special categories with ACEBench's scoring rules.

Normal: the completion's calls (decoded with the template's grammar) must match one acceptable
ground truth: same number of calls, each ground-truth call matched by a distinct predicted call of
the same name with the same argument names, values equal, except strings, which pass when the
normalized expected string is a substring of the normalized predicted one (normalization: lower case,
spaces and `,./-_*^'"` removed). A multi-turn conversation (`normal_multi_turn_*`, one entry per turn,
ids `<conversation>_<turn>`) counts as correct only if every turn is.
Special: no call may be made, and the text must say the right thing: "Missing necessary parameters"
plus the function and the missing parameter names (incomplete), "There is incorrect value" plus the
wrong values (error_param), or that the request is beyond the functions' limitations (irrelevant).
These phrases are ACEBench's; `SYSTEM_SUFFIX` tells the model to use them.
Agent (agent_multi_step, agent_multi_turn): a sandboxed conversation with our simulated APIs
(`tooltune.environments.acebench_apis`), judged on the final state (end-to-end) and on the
milestone calls (process); the loop and its scoring are in `agent`. multi_turn needs a user
simulator (any Backend) and is skipped without one.
Summary: each group (normal, special, agent) is the unweighted mean of its categories (agent: both
categories required); overall = 0.2676 special + 0.578 normal + 0.1545 agent, None unless all groups
were run; `overall_without_agent` renormalizes the two other weights.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tooltune.data.sources import get_source
from tooltune.evaluation.acebench.agent import AGENT_CATEGORIES
from tooltune.evaluation.verdict import Verdict
from tooltune.parsing import parse_completion
from tooltune.prompts import grammar_for, render_answer
from tooltune.schema import Sample, ToolCall

WEIGHTS = {"special": 0.2676, "normal": 0.578, "agent": 0.1545}
AGENT_SKIP_MESSAGE = ("ACEBench agent categories (agent_multi_step, agent_multi_turn) need an endpoint "
                      "backend acting as the user simulator; skipped (not run offline)")
SYSTEM_SUFFIX = """
If the request lacks a required parameter, do not call a function; answer "Missing necessary parameters (param1, param2) for the api (ApiName)".
If a value in the request is wrong for the function, do not call it; answer "There is incorrect value (value) for the parameters (param) in the conversation history".
If no function can solve the request, answer "Due to the limitations of the function, I cannot solve this problem.\""""  # noqa: E501
_NORM = re.compile(r"[ \,\.\/\-\_\*\^'\"]")
_TURN_SUFFIX = re.compile(r"_\d+$")


def categories_in(data_dir: str | os.PathLike) -> list[str]:
    names = sorted(p.name[5:-5] for p in Path(data_dir).glob("data_*.json"))
    if not names:
        raise FileNotFoundError(f"no ACEBench data_<category>.json files in {data_dir}")
    return names


def load_samples(data_dir: str | os.PathLike, categories: Iterable[str]) -> list[tuple[str, Sample]]:
    """(category, Sample) for normal and special categories, through the data source adapter."""

    src = get_source("acebench")
    out = []
    for cat in categories:
        if cat.startswith("agent"):
            continue
        for rec in src.read(str(Path(data_dir) / f"data_{cat}.json")):
            for s in src.convert(rec.data, rec.position):
                if isinstance(s, Sample):
                    s.id = s.id.split(":", 1)[-1]
                    out.append((cat, s))
    return out


def data_files(data_dir: str | os.PathLike, categories: Iterable[str]) -> list[str]:
    root = Path(data_dir)
    pairs = [(root / f"data_{c}.json", root / "possible_answer" / f"data_{c}.json") for c in categories]
    return [str(p) for pair in pairs for p in pair if p.exists()]


def _norm(s: str) -> str:
    return _NORM.sub("", s).lower()


def value_matches(pred: Any, gold: Any) -> bool:
    if isinstance(gold, str):
        return isinstance(pred, str) and _norm(gold) in _norm(pred)
    if isinstance(gold, bool) or isinstance(pred, bool):
        return pred is gold
    if isinstance(gold, (int, float)):
        return isinstance(pred, (int, float)) and float(pred) == float(gold)
    if isinstance(gold, list):
        return isinstance(pred, list) and len(pred) == len(gold) and all(map(value_matches, pred, gold))
    if isinstance(gold, Mapping):
        return isinstance(pred, Mapping) and set(pred) == set(gold) and all(
            value_matches(pred[k], v) for k, v in gold.items())
    return pred == gold


def _call_matches(pred: ToolCall, gold: ToolCall) -> bool:
    return pred.name == gold.name and set(pred.arguments) == set(gold.arguments) and all(
        value_matches(pred.arguments[k], v) for k, v in gold.arguments.items())


def calls_match(pred: list[ToolCall], gold: list[ToolCall]) -> bool:
    """Order-free one-to-one matching of predicted to ground-truth calls."""
    if len(pred) != len(gold):
        return False
    left = list(pred)
    for g in gold:
        hit = next((i for i, p in enumerate(left) if _call_matches(p, g)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


def _special(cat: str, expected: Any, text: str) -> str | None:
    """None when the special answer is right, else why not."""
    low = text.lower()
    if cat == "special_irrelevant":
        return None if "limitation" in low else "does not say the request is beyond the functions"
    if cat == "special_incomplete":
        needed = ["missing necessary parameters"] + [w for f, ps in expected.items() for w in [f, *ps]]
    else:  # special_error_param
        needed = ["there is incorrect value"] + [str(v) for vs in expected.values() for v in vs]
    missing = [w for w in needed if w.lower() not in low]
    return None if not missing else f"answer lacks {missing!r}"


def score(sample: Sample, category: str, text: Any, template: str, mode: str = "strict") -> Verdict:
    parsed = parse_completion(text, grammar_for(template), mode)
    if category.startswith("special"):
        if parsed.calls:
            return Verdict(sample.id, category, False, "called a function on a special entry")
        why = _special(category, sample.meta.get("expected"), text if isinstance(text, str) else "")
        return Verdict(sample.id, category, why is None, why)
    if parsed.calls is None:
        return Verdict(sample.id, category, False, f"decode_failed: {parsed.error}")
    options = [[ToolCall.from_dict(c) for c in alt] for alt in sample.meta.get("alternatives") or []]
    if any(calls_match(parsed.calls, alt) for alt in options or [sample.answer]):
        return Verdict(sample.id, category, True)
    got = [c.to_dict() for c in parsed.calls]
    return Verdict(sample.id, category, False, f"calls do not match: {got!r:.300}")


def reference_answer(sample: Sample, category: str, template: str) -> str:
    """What a perfect model answers (scripted backend / harness tests)."""
    exp = sample.meta.get("expected")
    if category == "special_incomplete":
        (f, ps), = list(exp.items())[:1]
        return f"Missing necessary parameters ({', '.join(ps)}) for the api ({f})"
    if category == "special_error_param":
        vals = ", ".join(str(v) for vs in exp.values() for v in vs)
        params = ", ".join(exp)
        return f"There is incorrect value ({vals}) for the parameters ({params}) in the conversation history"
    if category == "special_irrelevant":
        return "Due to the limitations of the function, I cannot solve this problem."
    return render_answer(sample.answer, template)


def scores(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-category accuracy, group means and ACEBench's weighted overall (see the module doc).

    Agent categories also get `process_accuracy` (mean of the entries' process scores); the agent
    group (end-to-end) and `agent_process_accuracy` need both agent categories, as ACEBench averages
    the two (it counts a missing one as 0; we report None instead).

    `r2if` holds the columns of R2IF's ACEBench table: `atom` (unweighted mean of the normal_atom_*
    categories run), `single_turn` (the same over normal_single_turn_*), `irrelevant`
    (special_irrelevant) and `overall`, their unweighted mean; each is None when none of its
    categories ran, and `overall` unless all three are there."""
    by_cat: dict[str, dict[str, bool]] = {}
    process: dict[str, list[float]] = {}
    for r in records:
        key = _TURN_SUFFIX.sub("", r["id"]) if r["category"].startswith("normal_multi_turn") else r["id"]
        unit = by_cat.setdefault(r["category"], {})
        unit[key] = unit.get(key, True) and bool(r["valid"])
        if r["category"] in AGENT_CATEGORIES:
            process.setdefault(r["category"], []).append(float(r.get("process") or 0.0))
    cats: dict[str, dict[str, Any]] = {
        c: {"accuracy": sum(u.values()) / len(u), "correct": sum(u.values()), "total": len(u)}
        for c, u in sorted(by_cat.items())}
    for c, ps in process.items():
        cats[c]["process_accuracy"] = sum(ps) / len(ps)
    groups: dict[str, float | None] = {}
    for g in WEIGHTS:
        accs = [v["accuracy"] for c, v in cats.items() if c.startswith(g)]
        groups[g] = sum(accs) / len(accs) if accs else None
    agent_process = None
    if all(c in cats for c in AGENT_CATEGORIES):
        agent_process = sum(cats[c]["process_accuracy"] for c in AGENT_CATEGORIES) / len(AGENT_CATEGORIES)
    else:
        groups["agent"] = None
    overall = None
    if all(v is not None for v in groups.values()):
        overall = sum(WEIGHTS[g] * groups[g] for g in WEIGHTS)  # type: ignore[operator]
    partial = None
    if groups["normal"] is not None and groups["special"] is not None:
        partial = (WEIGHTS["normal"] * groups["normal"] + WEIGHTS["special"] * groups["special"]) / (
            WEIGHTS["normal"] + WEIGHTS["special"])

    def prefix_mean(prefix: str) -> float | None:
        accs = [v["accuracy"] for c, v in cats.items() if c.startswith(prefix)]
        return sum(accs) / len(accs) if accs else None

    r2if = {"atom": prefix_mean("normal_atom_"), "single_turn": prefix_mean("normal_single_turn_"),
            "irrelevant": prefix_mean("special_irrelevant")}
    parts = list(r2if.values())
    r2if["overall"] = None if any(x is None for x in parts) else sum(parts) / len(parts)  # type: ignore[arg-type]
    return {"categories": cats, "groups": groups, "agent_process_accuracy": agent_process,
            "overall": overall, "overall_without_agent": partial, "r2if": r2if}
