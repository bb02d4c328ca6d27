"""Reward agreement: tooltune's rewards against restatements of the authors' scorers, class by class.

Completions are built class by class (well-formed right answers, wrong values, missing and duplicate
calls, and the malformed shapes that tell scorers apart: nested tags, a stray closing tag, arguments
as a JSON string, duplicate keys, double-encoded JSON, a bare scalar, no or an unclosed reasoning
block, broken JSON, text around the blocks, ToolRL's own one-object-per-line format, ...) on ground
truths from `tooltune.data.synthetic`. Every completion is scored by our rewards and by a restatement
of the matching original scorer, written below from the published rules (RESTATED, not the authors'
code):

- `binary_reward`, strict and substring: Tool-N1's `compute_score_v0` (NVlabs/Tool-N1,
  verl/verl/utils/reward_score/toolcall.py) with the two format rules of its Trinity-RFT adaptation
  (think tags once each, `</think>` before the first `<tool_call>`); the release without them is an
  extra column;
- `correctness` (binary, `require_format=False`): Tool-N1's `compute_score_v2` (without reasoning);
- `fine_grained`, strict and substring: Tool-N1's `compute_score_v4` (partial credit for the
  reasoning tags and the function names);
- `toolrl` (the `toolrl` preset, grammar `toolrl`): ToolRL's `compute_score` (qiancheng0/ToolRL,
  verl/utils/reward_score/rlla.py) with its default settings.

The table gives, per class and pair, the share of completions on which both give the same score; a
scorer that raises is shown as "raises". Disagreements listed in `DOCUMENTED` are deliberate (the
reason is printed; docs/rewards.md explains each); any other disagreement makes the run exit with
status 1. Rewards per second (CPU time of this process, scorers interleaved, best of --repeats) are
measured in the same run over all completions, ground truths given as the JSON strings TRL and verl
rows carry.

Run: python bench/reward_agreement.py [--n 200] [--repeats 3] [--out agreement.json]
(or `tooltune bench reward_agreement ...`)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tooltune.data.synthetic import SynthConfig, generate  # noqa: E402
from tooltune.prompts import render_answer  # noqa: E402
from tooltune.rewards import binary_reward  # noqa: E402
from tooltune.rewards.fine_grained import FineGrainedReward  # noqa: E402
from tooltune.rewards.toolrl import ToolRLReward  # noqa: E402
from tooltune.schema import Sample, ToolCall  # noqa: E402

# =========================================================================================================
# RESTATED ORIGINAL SCORERS. These restate the rules of the authors' published scorers for comparison;
# they are not the authors' code and are not used for training.
# =========================================================================================================

_N1_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def _n1_extract(solution: str) -> Any:
    """Tool-N1: the text after the last `<|im_start|>assistant` marker (the whole completion here), the
    last non-greedy `<tool_call>(.*?)</tool_call>` match, stripped, `json.loads` (None if not JSON)."""
    marker = solution.rfind("<|im_start|>assistant")
    if marker >= 0:
        solution = solution[marker:]
    blocks = _N1_BLOCK.findall(solution)
    if not blocks:
        return None
    try:
        return json.loads(blocks[-1].strip())
    except json.JSONDecodeError:
        return None


def _n1_result(solution: str) -> Any:
    """The decoded block as Tool-N1 normalizes it: a JSON string is decoded once more (None if that
    fails), a single object becomes a one-element list."""
    result = _n1_extract(solution)
    if isinstance(result, str):
        try:
            result = json.loads(result)
        except json.JSONDecodeError:
            result = None
    if isinstance(result, dict):
        result = [result]
    return result


def _n1_valid_format(result: Any) -> bool:
    """Every entry an object with "name" and "arguments". Iterating a number raises TypeError, as the
    original does."""
    items = list(result)
    return all(isinstance(c, dict) for c in items) and all("name" in c and "arguments" in c for c in items)


def _n1_verdict(result: list, answer: list) -> int:
    """2: the same multiset of (name, json.dumps(arguments, sort_keys=True)); 1: the same names; 0."""
    if not result or not answer:
        return 2 if len(result) == len(answer) else 0
    try:
        full_r = Counter((c["name"], json.dumps(c["arguments"], sort_keys=True)) for c in result)
        full_a = Counter((c["name"], json.dumps(c["arguments"], sort_keys=True)) for c in answer)
    except TypeError:
        return 0
    if full_r == full_a:
        return 2
    return 1 if Counter(c["name"] for c in result) == Counter(c["name"] for c in answer) else 0


def _think_present(solution: str) -> bool:
    return "<think>" in solution and "</think>" in solution


def restated_tool_n1_v0(solution: str, ground_truth: str, adapted: bool = True) -> float:
    """Tool-N1 binary scorer (`compute_score_v0`): 1 when a decoded block of valid calls equals the
    answer and both think tags appear. `adapted` adds the Trinity-RFT adaptation's two rules: each think
    tag exactly once, and `</think>` before the first `<tool_call>`."""
    answer = json.loads(ground_truth)
    result = _n1_result(solution)
    if result is None or not _think_present(solution):
        return 0.0
    if adapted:
        if solution.count("<think>") != 1 or solution.count("</think>") != 1:
            return 0.0
        first_call = solution.find("<tool_call>")
        if first_call != -1 and solution.find("</think>") > first_call:
            return 0.0
    if not _n1_valid_format(result):
        return 0.0
    return 1.0 if _n1_verdict(result, answer) == 2 else 0.0


def restated_tool_n1_v2(solution: str, ground_truth: str) -> float:
    """Tool-N1 "without reasoning" ablation (`compute_score_v2`): v0 without the think-tag checks."""
    answer = json.loads(ground_truth)
    result = _n1_result(solution)
    if result is None or not _n1_valid_format(result):
        return 0.0
    return 1.0 if _n1_verdict(result, answer) == 2 else 0.0


def restated_tool_n1_v4(solution: str, ground_truth: str) -> float:
    """Tool-N1 fine-grained variant (`compute_score_v4`): 0.2 when both think tags appear, then, for a
    decoded block of valid calls, +0.8 when it equals the answer, else +0.2 when the names do."""
    answer = json.loads(ground_truth)
    result = _n1_result(solution)
    total = 0.2 if _think_present(solution) else 0.0
    if result is None or not _n1_valid_format(result):
        return total
    verdict = _n1_verdict(result, answer)
    return total + (0.8 if verdict == 2 else 0.2 if verdict == 1 else 0.0)


_RL_RESPONSE_ONLY = re.compile(r"^<think>.*?</think>\n<response>.*?</response>$", re.DOTALL)
_RL_CALL_ONLY = re.compile(r"^<think>.*?</think>\n<tool_call>\n.*?\n</tool_call>$", re.DOTALL)
_RL_CALL_RESPONSE = re.compile(
    r"^<think>.*?</think>\n<tool_call>\n.*?\n</tool_call>\n<response>.*?</response>$", re.DOTALL
)
_RL_THINK_ONLY = re.compile(r"^<think>.*?</think>$", re.DOTALL)


def _rl_format(response: str, gold: str) -> float:
    """ToolRL's format term: the pattern is chosen by which blocks the ground-truth text has."""
    has_resp, has_call = "<response>" in gold, "<tool_call>" in gold
    once = lambda *tags: all(response.count(t) == 1 for t in tags)  # noqa: E731
    if has_resp and not has_call:
        ok = _RL_RESPONSE_ONLY.search(response) and once("<response>", "</response>")
    elif has_call and not has_resp:
        ok = _RL_CALL_ONLY.search(response) and once("<tool_call>", "</tool_call>")
    elif has_call and has_resp:
        tags = ("<tool_call>", "</tool_call>", "<response>", "</response>")
        ok = _RL_CALL_RESPONSE.search(response) and once(*tags)
    else:
        ok = _RL_THINK_ONLY.search(response)
    return 1.0 if ok else 0.0


def _rl_jaccard(a: list, b: list) -> float:
    """ToolRL's list similarity: 1 for equal lists, 0 if one is empty, else a multiset Jaccard index."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    ca, cb = Counter(a), Counter(b)
    inter = sum(min(ca[k], cb[k]) for k in ca.keys() & cb.keys())
    return inter / (len(a) + len(b) - inter)


def _rl_calls_score(gt: list, pd: list) -> float:
    """ToolRL's correctness in [-3, 3]: 3 for equal lists (Python ==), else names Jaccard plus, per
    ground-truth call in order, the best unused same-name prediction (greedy, first best on ties) by
    keys Jaccard + equal values (Python ==), over 1 + sum(1 + |params|)."""
    if gt == pd:
        return 3.0
    score = _rl_jaccard([g["name"] for g in gt], [p["name"] for p in pd])
    s_max, used = 1.0, set()
    for g in gt:
        params = g["parameters"]
        s_max += 1.0 + len(params)
        best, best_i = 0.0, -1
        for i, p in enumerate(pd):
            if i in used or p["name"] != g["name"]:
                continue
            pp = p["parameters"]
            s = _rl_jaccard(list(params.keys()), list(pp.keys()))
            s += sum(1.0 for k, v in params.items() if k in pp and pp[k] == v)
            if s > best:
                best, best_i = s, i
        if best_i >= 0:
            used.add(best_i)
            score += best
    return 6.0 * score / s_max - 3.0


def _rl_lines(text: str) -> list:
    """ToolRL's read of a call block: after the first <tool_call>, before the next </tool_call>, stripped,
    one `json.loads` per line."""
    block = text.split("<tool_call>")[1].split("</tool_call>")[0]
    return [json.loads(line) for line in block.strip().split("\n")]


def restated_toolrl(solution: str, gold: str) -> float:
    """ToolRL reward (`compute_score`, default settings): format (0/1) + correctness (-3..3, 0 when the
    ground truth has no call), on the completion cut at the chat markers and stripped. Any error while
    reading or scoring the predicted calls gives -3."""
    response = solution.split("<|im_start|>assistant")[-1].split("<|im_end|>")[0].strip()
    total = _rl_format(response, gold)
    if "<tool_call>" not in gold:
        return total
    gt = _rl_lines(gold)
    try:
        if "<tool_call>" not in response or "</tool_call>" not in response:
            raise ValueError("no call block")
        return total + _rl_calls_score(gt, _rl_lines(response))
    except Exception:
        return total - 3.0


# =========================================================================================================
# Completion classes: each maker turns a ground truth into (completion, ground truth, whether ToolRL's
# reference text has a <response> block), or None when the ground truth does not fit the class
# =========================================================================================================

R = "The request maps to these calls."

Case = tuple[str, list[ToolCall], bool]
Maker = Callable[[list[ToolCall]], "Case | None"]


def n1_text(calls: Any, reasoning: str = R) -> str:
    """A Tool-N1 answer with `calls` (dicts or ToolCalls) dumped as a JSON list."""
    if calls and isinstance(calls[0], ToolCall):
        calls = [c.to_dict() for c in calls]
    return f"<think>{reasoning}</think>\n<tool_call>\n{json.dumps(calls)}\n</tool_call>"


def n1_with_block(block: str, reasoning: str = R) -> str:
    return f"<think>{reasoning}</think>\n<tool_call>\n{block}\n</tool_call>"


def toolrl_text(
    calls: list[ToolCall], reasoning: str = R, key: str = "parameters", response: str | None = None
) -> str:
    """An answer in ToolRL's format: one JSON object per line, optional <response> block."""
    lines = "\n".join(json.dumps({"name": c.name, key: c.arguments}) for c in calls)
    text = f"<think>{reasoning}</think>\n<tool_call>\n{lines}\n</tool_call>"
    return text + (f"\n<response>{response}</response>" if response is not None else "")


def toolrl_gold(calls: list[ToolCall], with_response: bool = False) -> str:
    """The ground truth as ToolRL's data holds it: the reference answer text."""
    if not calls:
        return "<think>No tool fits the request.</think>\n<response>I cannot help with that.</response>"
    return toolrl_text(calls, response="Done." if with_response else None)


def other_value(v: Any) -> Any:
    """A different value of the same JSON type (so that no scorer's equality can confuse the two)."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v + 1.5
    if isinstance(v, str):
        return v + "x"
    return "other"


def with_value(calls: list[ToolCall], i: int, key: str, value: Any) -> list[ToolCall]:
    out = [ToolCall(c.name, dict(c.arguments)) for c in calls]
    out[i].arguments[key] = value
    return out


def first_arg(gold: list[ToolCall], kind: type | None = None) -> tuple[int, str, Any] | None:
    """(call index, key, value) of the first argument (of exactly type `kind`, if given)."""
    for i, c in enumerate(gold):
        for k, v in c.arguments.items():
            if kind is None or type(v) is kind:
                return i, k, v
    return None


CLASSES: dict[str, Maker] = {}


def cls(name: str, needs_calls: bool = True) -> Callable[[Callable[[list[ToolCall]], Any]], Maker]:
    """Register a class; its function returns the completion text, a full `Case`, or None."""

    def register(f: Callable[[list[ToolCall]], Any]) -> Maker:
        def make(gold: list[ToolCall]) -> Case | None:
            if needs_calls and not gold:
                return None
            out = f(gold)
            return (out, gold, False) if isinstance(out, str) else out

        CLASSES[name] = make
        return make

    return register


# --- well-formed Tool-N1 answers ----------------------------------------------------------------------


@cls("well-formed, right")
def _right(g):
    return render_answer(g, "tool_n1", reasoning=R)


@cls("well-formed, wrong value")
def _wrong_value(g):
    a = first_arg(g)
    return None if a is None else n1_text(with_value(g, a[0], a[1], other_value(a[2])))


@cls("well-formed, wrong function")
def _wrong_function(g):
    return n1_text([ToolCall(g[0].name + "_v2", g[0].arguments), *g[1:]])


@cls("well-formed, a call missing")
def _missing(g):
    return n1_text(g[:-1])


@cls("well-formed, duplicate call")
def _duplicate(g):
    return n1_text([*g, g[0]])


@cls("well-formed, no call expected: []", needs_calls=False)
def _no_call(g):
    return n1_text([], f"No tool fits ({len(g)} calls elsewhere)."), [], False


@cls("well-formed, one object (no list)")
def _one_object(g):
    return n1_with_block(json.dumps(g[0].to_dict())) if len(g) == 1 else None


@cls("integer written as float")
def _int_as_float(g):
    a = first_arg(g, int)
    return None if a is None else n1_text(with_value(g, a[0], a[1], float(a[2])))


# --- malformed Tool-N1 answers ------------------------------------------------------------------------


@cls("nested call tags")
def _nested(g):
    return n1_text(g).replace("<tool_call>\n", "<tool_call>\n<tool_call>\n", 1)


@cls("stray closing tag after the block")
def _stray(g):
    return n1_text(g) + "\n</tool_call>"


@cls("arguments as a JSON string")
def _args_as_string(g):
    return n1_text([{"name": c.name, "arguments": json.dumps(c.arguments)} for c in g])


@cls("duplicate keys (last one right)")
def _dup_keys(g):
    a = first_arg(g)
    if a is None:
        return None
    i, k, v = a
    calls = [c.to_dict() for c in g]
    args = json.dumps(calls[i]["arguments"])
    calls[i]["arguments"] = "@ARGS@"
    wrong_first = "{" + f"{json.dumps(k)}: {json.dumps(other_value(v))}, " + args[1:]
    return n1_with_block(json.dumps(calls).replace('"@ARGS@"', wrong_first))


@cls("call list as a JSON string")
def _double_encoded(g):
    return n1_with_block(json.dumps(json.dumps([c.to_dict() for c in g])))


@cls("bare scalar in the block")
def _scalar(g):
    return n1_with_block("42")


@cls("missing 'arguments' key")
def _no_arguments(g):
    return n1_text([{"name": c.name} for c in g])


@cls("no reasoning block")
def _no_reasoning(g):
    return n1_text(g).split("</think>\n", 1)[1]


@cls("unclosed reasoning block")
def _unclosed(g):
    return n1_text(g).replace("</think>", "", 1)


@cls("broken JSON after a right reasoning block")
def _broken(g):
    return n1_text(g)[: -len("]\n</tool_call>")] + "\n</tool_call>"


@cls("empty reasoning")
def _empty_reasoning(g):
    return n1_text(g, "")


@cls("text around the blocks")
def _text_around(g):
    return "Sure, let me check.\n" + n1_text(g) + "\nAnything else?"


@cls("repeated <think> block")
def _repeated_think(g):
    return "<think>First thought.</think>" + n1_text(g)


@cls("reasoning after the call block")
def _reasoning_after(g):
    return n1_text(g).split("</think>\n", 1)[1] + "\n<think>Checked.</think>"


@cls("two call blocks, the last right")
def _two_blocks(g):
    return n1_text([ToolCall(g[0].name + "_v2")]) + "\n" + n1_text(g).split("\n", 1)[1]


# --- ToolRL's own format: one object per line, "parameters", optional <response> ------------------------


@cls("ToolRL format, right")
def _rl_right(g):
    return toolrl_text(g)


def distinct_names(g: list[ToolCall]) -> bool:
    """Every function called once: ToolRL's greedy matching is then the best one (the greedy-vs-optimal
    difference has its own class)."""
    return len({c.name for c in g}) == len(g)


@cls("ToolRL format, wrong value")
def _rl_wrong_value(g):
    a = first_arg(g)
    ok = a is not None and distinct_names(g)
    return toolrl_text(with_value(g, a[0], a[1], other_value(a[2]))) if ok else None


@cls("ToolRL format, calls + <response> (reference has one)")
def _rl_response(g):
    return toolrl_text(g, response="Done."), g, True


@cls("ToolRL format, calls + <response> (reference has none)")
def _rl_response_not_in_reference(g):
    return toolrl_text(g, response="Done.")


@cls("ToolRL format, no newline after <tool_call>")
def _rl_no_newline(g):
    return toolrl_text(g).replace("<tool_call>\n", "<tool_call>")


@cls('ToolRL format, "arguments" instead of "parameters"')
def _rl_arguments_key(g):
    return toolrl_text(g, key="arguments")


@cls("ToolRL format, integer written as float")
def _rl_int_as_float(g):
    a = first_arg(g, int)
    ok = a is not None and distinct_names(g)
    return toolrl_text(with_value(g, a[0], a[1], float(a[2]))) if ok else None


@cls("ToolRL format, same-name calls (greedy vs optimal)")
def _rl_greedy(g):
    """Two same-name calls where ToolRL's greedy matching pairs the first ground-truth call with the
    wrong prediction (a tie it breaks by order) and scores lower than the best matching."""
    c = next((c for c in g if len(c.arguments) >= 2), None)
    if c is None:
        return None
    (k1, v1), (k2, v2) = list(c.arguments.items())[:2]
    g2 = {**c.arguments, k2: other_value(v2)}
    truth = [ToolCall(c.name, dict(c.arguments)), ToolCall(c.name, g2)]
    pred = [ToolCall(c.name, dict(g2)), ToolCall(c.name, {**c.arguments, k1: other_value(v1)})]
    return toolrl_text(pred), truth, False


@cls("ToolRL format, no call expected: <response>", needs_calls=False)
def _rl_no_call(g):
    text = f"<think>No tool fits ({len(g)} calls elsewhere).</think>\n<response>I cannot help.</response>"
    return text, [], False


# =========================================================================================================
# Pairs: (ours, restated original) on (completion, ground truth JSON, ToolRL reference text)
# =========================================================================================================

_FG_STRICT, _FG_SUBSTRING = FineGrainedReward(), FineGrainedReward(format_mode="substring")
_TOOLRL = ToolRLReward(template="toolrl")

Scorer = Callable[[str, str, str], float]
PAIRS: dict[str, tuple[Scorer, Scorer]] = {
    "binary strict": (
        lambda c, g, t: binary_reward(c, g),
        lambda c, g, t: restated_tool_n1_v0(c, g),
    ),
    "binary substring": (
        lambda c, g, t: binary_reward(c, g, format_mode="substring"),
        lambda c, g, t: restated_tool_n1_v0(c, g),
    ),
    "binary substring vs release": (
        lambda c, g, t: binary_reward(c, g, format_mode="substring"),
        lambda c, g, t: restated_tool_n1_v0(c, g, adapted=False),
    ),
    "correctness": (
        lambda c, g, t: binary_reward(c, g, require_format=False),
        lambda c, g, t: restated_tool_n1_v2(c, g),
    ),
    "fine_grained strict": (
        lambda c, g, t: _FG_STRICT(c, g),
        lambda c, g, t: restated_tool_n1_v4(c, g),
    ),
    "fine_grained substring": (
        lambda c, g, t: _FG_SUBSTRING(c, g),
        lambda c, g, t: restated_tool_n1_v4(c, g),
    ),
    "toolrl": (
        lambda c, g, t: _TOOLRL(c, g),
        lambda c, g, t: restated_toolrl(c, t),
    ),
}
"""The binary rewards' original is Tool-N1 v0 with the Trinity-RFT adaptation's two rules, except in
"binary substring vs release" (v0 as NVlabs released it)."""

STRICT = "strict format: refuses what the original lets through"
DOUBLE = "a call list encoded as a JSON string is not the paper's format (the original decodes it again)"
ONE_REASONING = "one reasoning block, before the call (the adaptation's rules; the release checks presence)"
EMPTY_TRUTH = "an empty ground truth is scored (ToolRL skips it with 0)"
_STRICT_CLASSES = (
    "stray closing tag after the block",
    "duplicate keys (last one right)",
    "text around the blocks",
    "empty reasoning",
    "two call blocks, the last right",
    "repeated <think> block",
    "reasoning after the call block",
    "ToolRL format, no call expected: <response>",
)
DOCUMENTED: dict[tuple[str, str], str] = {
    **{(c, "binary strict"): STRICT for c in _STRICT_CLASSES[:5]},
    **{(c, "fine_grained strict"): STRICT for c in _STRICT_CLASSES},
    **{("call list as a JSON string", p): DOUBLE for p in PAIRS if p != "toolrl"},
    **{(c, p): ONE_REASONING for c in _STRICT_CLASSES[5:7] for p in ("binary substring vs release",
                                                                     "fine_grained substring")},
    ("well-formed, no call expected: []", "toolrl"): EMPTY_TRUTH,
    ("ToolRL format, no call expected: <response>", "toolrl"): EMPTY_TRUTH,
    ("ToolRL format, calls + <response> (reference has none)", "toolrl"):
        "a <response> after the calls is optional (the ground truth is a call list, not a text)",
    ("ToolRL format, integer written as float", "toolrl"): "typed equality: 5 != 5.0 (ToolRL: Python ==)",
    ("ToolRL format, same-name calls (greedy vs optimal)", "toolrl"):
        "optimal matching (ToolRL: greedy, which can only score lower)",
}


def gold_pool(n: int, seed: int) -> list[list[ToolCall]]:
    return [Sample.from_dict(rec).answer for rec in generate(SynthConfig(n=n, seed=seed))]


def build_cases(n: int, seed: int = 0) -> dict[str, list[tuple[str, str, str]]]:
    """Up to `n` (completion, ground truth JSON, ToolRL reference text) per class."""
    pool = gold_pool(max(4 * n, 200), seed)
    out: dict[str, list[tuple[str, str, str]]] = {}
    for name, make in CLASSES.items():
        cases = []
        for gold in pool:
            case = make(gold)
            if case is None:
                continue
            text, truth, with_response = case
            cases.append((text, json.dumps([c.to_dict() for c in truth]), toolrl_gold(truth, with_response)))
            if len(cases) >= n:
                break
        out[name] = cases
    return out


def _score(fn: Scorer, case: tuple[str, str, str]) -> float | str:
    try:
        return float(fn(*case))
    except Exception as e:  # the original raises on some inputs: recorded, not hidden
        return f"raises {type(e).__name__}"


def agreement(cases: dict[str, list[tuple[str, str, str]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per class and pair: n, agreeing n, the original's raises, a sample of differing scores."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for cls, items in cases.items():
        row = table[cls] = {}
        for pair, (ours, orig) in PAIRS.items():
            agree, raises, examples = 0, 0, Counter()
            for case in items:
                a, b = _score(ours, case), _score(orig, case)
                if isinstance(b, str):
                    raises += 1
                elif isinstance(a, float) and abs(a - b) < 1e-9:
                    agree += 1
                else:
                    examples[f"ours {a} / original {b}"] += 1
            row[pair] = {
                "n": len(items),
                "agree": agree,
                "original_raises": raises,
                "differ": dict(examples.most_common(3)),
                "documented": DOCUMENTED.get((cls, pair)),
            }
    return table


def throughput(cases: dict[str, list[tuple[str, str, str]]], repeats: int) -> dict[str, dict[str, float]]:
    """Completions per CPU second of ours and the restated original for every pair, over all classes,
    interleaved, best of `repeats`; a case on which the original raises is scored inside a try."""
    flat = [c for items in cases.values() for c in items]
    best: dict[tuple[str, int], float] = {}
    for _ in range(repeats):
        for pair, fns in PAIRS.items():
            for side, fn in enumerate(fns):
                t0 = time.process_time()
                for case in flat:
                    try:
                        fn(*case)
                    except Exception:
                        pass
                dt = time.process_time() - t0
                best[(pair, side)] = min(best.get((pair, side), float("inf")), dt)
    return {
        pair: {
            "n": len(flat),
            "ours_per_s": len(flat) / best[(pair, 0)],
            "original_per_s": len(flat) / best[(pair, 1)],
            "ratio": best[(pair, 1)] / best[(pair, 0)],
        }
        for pair in PAIRS
    }


def _cell(c: dict[str, Any]) -> str:
    if not c["n"]:
        return "—"
    if c["original_raises"] == c["n"]:
        return "raises"
    scored = c["n"] - c["original_raises"]
    pct = 100 * c["agree"] / scored
    return f"{pct:.0f}%" + ("*" if c["agree"] < scored and c["documented"] else "")


def undocumented(table: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    return [
        f"{cls} / {pair}: {c['differ']}"
        for cls, row in table.items()
        for pair, c in row.items()
        if c["agree"] + c["original_raises"] < c["n"] and not c["documented"]
    ]


def print_report(table: dict, speed: dict) -> None:
    pairs = list(PAIRS)
    print("Agreement with the restated original scorers (share of completions scored the same; "
          "* = a documented difference, see below):")
    print("| class | n | " + " | ".join(pairs) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in pairs) + " |")
    for cls, row in table.items():
        n = next(iter(row.values()))["n"]
        print(f"| {cls} | {n} | " + " | ".join(_cell(row[p]) for p in pairs) + " |")
    print("\nDocumented differences seen in this run:")
    seen = sorted({(c["documented"], pair) for row in table.values() for pair, c in row.items()
                   if c["documented"] and c["agree"] + c["original_raises"] < c["n"]})
    for reason, pair in seen:
        print(f"  {pair}: {reason}")
    print(f"\nRewards per second (CPU time, best of the repeats, {next(iter(speed.values()))['n']:,} "
          "completions, all classes):")
    print("| reward | ours /s | restated original /s | ours / original |")
    print("| --- | ---: | ---: | ---: |")
    for pair, s in speed.items():
        print(f"| {pair} | {s['ours_per_s']:,.0f} | {s['original_per_s']:,.0f} | {s['ratio']:.2f}× |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="completions per class")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic ground truths")
    ap.add_argument("--repeats", type=int, default=3, help="throughput: best of this many interleaved runs")
    ap.add_argument("--out", default=None, help="write the table and the throughput as JSON here")
    args = ap.parse_args(argv)

    cases = build_cases(args.n, args.seed)
    table = agreement(cases)
    speed = throughput(cases, args.repeats)
    print_report(table, speed)
    bad = undocumented(table)
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"n_per_class": args.n, "seed": args.seed, "agreement": table, "throughput": speed,
             "undocumented": bad}, indent=1))
        print(f"\nwrote {args.out}")
    if bad:
        print("\nUNDOCUMENTED disagreements:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
