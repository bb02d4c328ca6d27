"""ACEBench (English): normal and special categories scored as ACEBench's official code scores them.

`score(sample, category, text, template, mode, scoring)` under `scoring`:
- `official`: ACEBench's verdict, rule for rule (ACEBench/ACEBench commit e6db74b; the rules are in
  `official` and `official_decode`). Under the `python` grammar (ACEBench's own output format
  `[Func(a=1, b='x')]`: the `bfcl`/`bfcl_strong` templates or the grammar name `python`) the raw
  completion is decoded exactly as ACEBench decodes it: whitespace removed, then one Python list of
  calls, so a code fence or a call without its brackets fails. Under the other templates (tool_n1,
  r2if, hermes, native, ...) the template's grammar extracts the calls under `mode` (that step is
  ours, as for BFCL) and they are written as ACEBench's call list and decoded by ACEBench's rules, so
  the official checker judges them exactly as it would the same calls in its own format.
- `corrected`: the same with the fixes of `official.CORRECTED_RULES`, each named and documented in
  docs/evaluation.md (top-level numbers compared, numbers in objects by value, nested lists compared
  element by element, empty lists, untyped array items, one predicted call per expected call).
Special entries, both modes: ACEBench's phrases in the answer, case-sensitive ("Missing necessary
parameters" + the function + every missing parameter; "There is incorrect value" + every wrong value;
"the limitations of the function"); the answer is the completion after the template's reasoning block
(ACEBench likewise drops a reasoning model's thinking before scoring). `SYSTEM_SUFFIX` tells the
model these phrases. A multi-turn conversation (`normal_multi_turn_*`, one entry per turn, ids
`<conversation>_<turn>`) counts as correct only if every turn is.
Agent (agent_multi_step, agent_multi_turn): a sandboxed conversation with our simulated APIs
(`tooltune.environments.acebench_apis`), judged on the final state (end-to-end) and on the
milestone calls (process); the loop and its scoring are in `agent`. multi_turn needs a user
simulator (any Backend) and is skipped without one.
Summary (ACEBench `evaluation_helper.generate_result_csv`): each group (normal: 12 categories,
special: 3, agent: 2) is the unweighted mean of its categories; overall = 0.2676 special + 0.578 normal
+ 0.1545 agent. ACEBench rounds each category and the overall to 3 decimals and counts a category that
was not run as 0; here accuracies are unrounded, and a group or `overall` that lacks a category is
None (`overall_without_agent` renormalizes the two other weights).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tooltune.evaluation.acebench.data import AGENT_CATEGORIES
from tooltune.evaluation.acebench.official import check_normal, check_special, rules_for
from tooltune.evaluation.acebench.official_decode import Decoded, decode_answer
from tooltune.evaluation.verdict import Verdict
from tooltune.parsing import Grammar, parse_completion
from tooltune.prompts import grammar_for, python_calls, render_answer
from tooltune.schema import Sample, Scoring

WEIGHTS = {"special": 0.2676, "normal": 0.578, "agent": 0.1545}
AGENT_SKIP_MESSAGE = ("ACEBench agent categories (agent_multi_step, agent_multi_turn) need an endpoint "
                      "backend acting as the user simulator; skipped (not run offline)")
SYSTEM_SUFFIX = """
If the request lacks a required parameter, do not call a function; answer "Missing necessary parameters (param1, param2) for the api (ApiName)".
If a value in the request is wrong for the function, do not call it; answer "There is incorrect value (value) for the parameters (param) in the conversation history".
If no function can solve the request, answer "Due to the limitations of the function, I cannot solve this problem.\""""  # noqa: E501
IRRELEVANT_ANSWER = "Due to the limitations of the function, I cannot solve this problem."
"""ACEBench's own answer to a special_irrelevant entry (its ground truth)."""
_TURN_SUFFIX = re.compile(r"_\d+$")


def dialogue_id(entry_id: str, category: str) -> str:
    """The id of the dialogue a normal_multi_turn turn belongs to (ACEBench scores a dialogue as one
    item: correct when every turn is); other entries are their own item."""
    return _TURN_SUFFIX.sub("", entry_id) if category.startswith("normal_multi_turn") else entry_id


def official_inputs(sample: Sample, category: str) -> tuple[Any, Any]:
    """(function list, ground truth) in ACEBench's form: from `meta["official"]` (`load_samples`), else
    rebuilt from the sample's tools and answer (a name called twice becomes `name_1`, `name_2`)."""
    raw = sample.meta.get("official")
    if isinstance(raw, Mapping) and raw.get("function") is not None:
        return raw["function"], raw.get("ground_truth")
    functions = [t.to_dict() for t in sample.tools]
    if category.startswith("special"):
        return functions, sample.meta.get("expected")
    alternatives = sample.meta.get("alternatives") or [[c.to_dict() for c in sample.answer]]
    gold = []
    for alt in alternatives:
        names = [c["name"] for c in alt]
        gold.append({(n if names.count(n) == 1 else f"{n}_{i + 1}"): dict(c.get("arguments") or {})
                     for i, (n, c) in enumerate(zip(names, alt))})
    return functions, gold


def decode(text: str, template: str | Grammar, mode: str = "strict") -> tuple[Decoded | None, str | None]:
    """ACEBench's decoded form `[{name: {arg: value}}]` of a completion (see the module doc): the raw
    text under the `python` grammar, else the template's calls written as ACEBench's call list."""
    grammar = grammar_for(template)
    if grammar.name == "python":
        return decode_answer(text)
    parsed = parse_completion(text, grammar, mode)
    if parsed.calls is None:
        return None, parsed.error or "no call block decoded"
    return decode_answer(python_calls(parsed.calls))


def answer_text(text: str, template: str | Grammar) -> str:
    """The answer part of a completion: the text after the template's reasoning block, if it has one."""
    tags = grammar_for(template).reasoning
    if tags is not None:
        end = text.find(tags[1])
        if end >= 0:
            return text[end + len(tags[1]):]
    return text


def score(sample: Sample, category: str, text: Any, template: str, mode: str = "strict",
          scoring: Scoring = Scoring.OFFICIAL) -> Verdict:
    """The verdict on one completion of a normal or special entry under `scoring` (module doc)."""
    fixes = rules_for(scoring)
    text = text if isinstance(text, str) else ""
    functions, gold = official_inputs(sample, category)
    if category.startswith("special"):
        ok, why = check_special(category, gold, answer_text(text, template))
        return Verdict(sample.id, category, ok, why)
    decoded, err = decode(text, template, mode)
    if decoded is None:
        return Verdict(sample.id, category, False, f"decode_failed: {err}")
    ok, why = check_normal(functions, decoded, gold, fixes)
    return Verdict(sample.id, category, ok, None if ok else f"{why} (calls: {decoded!r:.300})")


def reference_answer(sample: Sample, category: str, template: str) -> str:
    """What a perfect model answers (scripted backend, harness tests): the first acceptable calls in
    `template`'s format, or the special answer in ACEBench's phrases (the format its prompt asks for)."""
    exp = sample.meta.get("expected")
    if category == "special_incomplete" and isinstance(exp, Mapping):
        return "; ".join(f"Missing necessary parameters ({', '.join(map(str, ps))}) for the api ({f})"
                         for f, ps in exp.items())
    if category == "special_error_param" and isinstance(exp, Mapping):
        vals = ", ".join(str(v) for vs in exp.values() for v in vs)
        params = ", ".join(exp)
        return f"There is incorrect value ({vals}) for the parameters ({params}) in the conversation history."
    if category == "special_irrelevant":
        return IRRELEVANT_ANSWER
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
        key = dialogue_id(r["id"], r["category"])
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
