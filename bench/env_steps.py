"""Environment steps: the worst step per environment on hostile arguments, and the cost of the budget.

1. Every method of every environment class (BFCL's eight API classes in both scorings, ACEBench's
   simulated APIs, the synthetic chain) is called with every extreme value below in each argument
   (numbers up to 4,000 digits and +-1e308, strings up to 19,000 characters, lists nested past the
   depth limit, long lists), one argument at a time and all at once; plus the GorillaFileSystem's
   stateful worst cases (folders nested to the depth limit, copies that double the tree). Printed per
   environment: calls, the worst step in ms and which call it was, and steps stopped by the budget.
2. The per-step cost of the time budget: a cheap call (MathAPI add) stepped with the default budget
   and with none, and `step_budget` entered and left on its own.

Run: python bench/env_steps.py [--repeats 20000]   (or `tooltune bench env_steps ...`)
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tooltune.environments import make_environment  # noqa: E402
from tooltune.environments.acebench import AcebenchEnvironment  # noqa: E402
from tooltune.environments.acebench_apis import CLASSES as ACE_CLASSES  # noqa: E402
from tooltune.environments.limits import STEP_SECONDS, step_budget  # noqa: E402
from tooltune.schema import Sample, Scoring, ToolCall, ToolSpec  # noqa: E402


def _nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


EXTREMES = [0, -1, 10**18, -(10**18), -(10**8), 10**4000, -(10**4000), 1e308, -1e308, 5e-324, "",
            "x" * 19_000, "../" * 6_000, "a/" * 9_000, "9" * 4_000, None, True, [], {}, _nested(15),
            _nested(20), [1] * 9_000, [10**4000] * 4, {"k": "v" * 10_000}]


def _sample(tools: list, spec: dict) -> Sample:
    return Sample("bench", "bench", "multi_step", [{"role": "user", "content": "x"}], tools, [],
                  meta={"env": spec})


def _bfcl_spec(classes: list[str]) -> dict:
    return {"name": "bfcl", "involved_classes": classes, "initial_config": {}, "ground_truth": []}


def _sweep(env, tools: list[tuple[str, list[str]]]) -> dict:
    worst, calls = (0.0, ""), 0
    for name, params in tools:
        for value in EXTREMES:
            for args in ([{p: (value if p == q else "x") for p in params} for q in params]
                         + [{p: value for p in params}]):
                start = time.perf_counter()
                env.step(ToolCall(name, args))
                took = time.perf_counter() - start
                calls += 1
                if took > worst[0]:
                    worst = (took, f"{name}({', '.join(f'{k}={v!r:.30}' for k, v in args.items())})")
    return {"calls": calls, "worst_ms": round(1000 * worst[0], 2), "worst_call": worst[1],
            "stopped": env.timeouts}


def _bfcl(scoring: Scoring) -> dict:
    from tooltune.data.sources.types import tool_spec_from_source
    from tooltune.environments.bfcl import CLASSES, BfclEnvironment, function_docs

    out = {}
    for cls in sorted(CLASSES):
        docs = function_docs(cls)
        env = BfclEnvironment(scoring=scoring)
        env.reset(_sample([tool_spec_from_source(d) for d in docs], _bfcl_spec([cls])))
        out[cls] = _sweep(env, [(d["name"], list(d["parameters"]["properties"])) for d in docs])
    out["GorillaFileSystem (stateful)"] = _fs_stateful(scoring)
    return out


def _fs_stateful(scoring: Scoring) -> dict:
    from tooltune.data.sources.types import tool_spec_from_source
    from tooltune.environments.bfcl import BfclEnvironment, function_docs

    def fresh():
        env = BfclEnvironment(scoring=scoring)
        env.reset(_sample([tool_spec_from_source(d) for d in function_docs("GorillaFileSystem")],
                          _bfcl_spec(["GorillaFileSystem"])))
        return env

    down = (ToolCall("mkdir", {"dir_name": "d"}), ToolCall("cd", {"folder": "d"}))
    deep = [c for _ in range(200) for c in down]
    deep += [ToolCall("cd", {"folder": "/"}), ToolCall("find", {}), ToolCall("du", {})]
    doubling = [ToolCall("mkdir", {"dir_name": "a"}), ToolCall("cd", {"folder": "a"}),
                ToolCall("touch", {"file_name": "f"}), ToolCall("cd", {"folder": ".."})]
    moves = [("a", "c"), ("b", "c"), ("c", "a")]
    round_ = [ToolCall("cp", {"source": "a", "destination": "b"}), ToolCall("mkdir", {"dir_name": "c"}),
              *(ToolCall("mv", {"source": a, "destination": b}) for a, b in moves)]
    doubling += [c for _ in range(40) for c in round_] + [ToolCall("find", {}), ToolCall("du", {})]
    worst, calls, stopped = (0.0, ""), 0, 0
    for plan in (deep, doubling, [ToolCall("mkdir", {"dir_name": "a"}),
                                  ToolCall("cp", {"source": "a", "destination": "a"}), ToolCall("find", {})]):
        env = fresh()
        for call in plan:
            start = time.perf_counter()
            env.step(call)
            took = time.perf_counter() - start
            calls += 1
            if took > worst[0]:
                worst = (took, f"{call.name}({call.arguments})")
        stopped += env.timeouts
    return {"calls": calls, "worst_ms": round(1000 * worst[0], 2), "worst_call": worst[1], "stopped": stopped}


def _acebench() -> dict:
    tools: dict[str, ToolSpec] = {}
    for cls in ACE_CLASSES.values():
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("_"):
                params = [p for p in inspect.signature(fn).parameters if p != "self"]
                tools[name] = ToolSpec(name, "", {"type": "object", "properties": {p: {} for p in params}})
    env = AcebenchEnvironment()
    spec = {"name": "acebench", "involved_classes": sorted(ACE_CLASSES), "goal_state": [],
            "initial_config": {"BaseApi": {"wifi": True}}}
    env.reset(_sample(list(tools.values()), spec))
    return _sweep(env, [(t.name, list(t.properties)) for t in tools.values()])


def _chain() -> dict:
    tools = [ToolSpec("find_station", "", {"type": "object", "properties": {"city": {}}}),
             ToolSpec("book_seats", "", {"type": "object", "properties": {"city": {}, "seats": {}}})]
    goal = [{"name": "find_station", "arguments": {"city": "Sydney"}}]
    env = make_environment("synthetic_chain")
    spec = {"name": "synthetic_chain", "goal": goal, "results": [[goal[0], {"next": "Paris"}]],
            "lookups": {"find_station": {"field": "next", "values": ["Rome", "Oslo"]}}}
    env.reset(_sample(tools, spec))
    return _sweep(env, [(t.name, list(t.properties)) for t in tools])


def _overhead(repeats: int) -> dict:
    out: dict = {"step_budget_enter_exit_us": None}
    start = time.perf_counter()
    for _ in range(repeats):
        with step_budget(STEP_SECONDS):
            pass
    out["step_budget_enter_exit_us"] = round(1e6 * (time.perf_counter() - start) / repeats, 2)
    if importlib.util.find_spec("bfcl_eval") is not None:
        from tooltune.data.sources.types import tool_spec_from_source
        from tooltune.environments.bfcl import BfclEnvironment, function_docs

        env = BfclEnvironment(Scoring.CORRECTED)
        tools = [tool_spec_from_source(d) for d in function_docs("MathAPI")]
        env.reset(_sample(tools, _bfcl_spec(["MathAPI"])))
        call = ToolCall("add", {"a": 1, "b": 2})
        totals = {STEP_SECONDS: 0.0, 0.0: 0.0}
        rounds = max(1, repeats // 1000)
        for _ in range(10):  # interleaved rounds: both settings see the same machine load
            for seconds in totals:
                env.step_seconds = seconds
                start = time.perf_counter()
                for _ in range(rounds * 10):
                    env.step(call)
                totals[seconds] += time.perf_counter() - start
        n = 10 * rounds * 10
        out["add_step_with_budget_us"] = round(1e6 * totals[STEP_SECONDS] / n, 2)
        out["add_step_without_budget_us"] = round(1e6 * totals[0.0] / n, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20_000, help="iterations of the overhead loops")
    args = ap.parse_args()
    report: dict = {"budget_s": STEP_SECONDS}
    if importlib.util.find_spec("bfcl_eval") is not None:
        report["bfcl corrected"] = _bfcl(Scoring.CORRECTED)
        report["bfcl official"] = _bfcl(Scoring.OFFICIAL)
    report["acebench"] = _acebench()
    report["synthetic_chain"] = _chain()
    report["overhead"] = _overhead(args.repeats)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
