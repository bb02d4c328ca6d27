"""Benchmark: scoring every BFCL single-turn entry from raw completion text, ours vs the official path.

Both sides start from raw text of the same answers (the ground truth, first acceptable value of each
argument; irrelevance entries answer with no call) and end with the official checker's verdict:
- tooltune: tool_n1 text -> `parse_completion` -> BFCL decoded form -> `ast_checker` / relevance rule;
- official: Python-call text -> bfcl-eval's own prompting decoder (`default_decode_ast_prompting`) ->
  the same checker (what `bfcl evaluate` does per entry, minus its file handling).
Imports and data loading are excluded from the timings; the process is pinned to one core when the
OS allows it. With `--multi-turn` the scripted player also runs all 800 multi-turn entries.

    python bench/eval_bfcl.py [--repeats 3] [--multi-turn]
"""

from __future__ import annotations

import argparse
import os
import time


def _pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        return "pinned to 1 core"
    return "not pinned (no sched_setaffinity)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed repetitions (the best is reported)")
    ap.add_argument("--multi-turn", action="store_true", help="also play all 800 multi-turn entries")
    args = ap.parse_args()
    pinned = _pin_one_core()

    from tooltune.environments.bfcl import bfcl_environment
    from tooltune.evaluation import bfcl
    from tooltune.evaluation.scripted import bfcl_answers
    from tooltune.prompts import python_calls
    from tooltune.schema import ToolCall

    bfcl_environment()
    from bfcl_eval.constants.enums import ReturnFormat
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting

    entries = bfcl.load_entries(bfcl.expand_categories("single_turn"))
    ours_text, _ = bfcl_answers("single_turn", "tool_n1")
    official_text = {}
    for e in entries:
        if "irrelevance" in e.category:
            official_text[e.id] = "I cannot answer this with the given functions."
        elif e.category == "live_relevance":
            official_text[e.id] = python_calls([ToolCall(e.entry["function"][0]["name"], {})])
        else:
            official_text[e.id] = python_calls(bfcl.ground_truth_calls(e))
    scorer = bfcl.SingleTurnScorer("tool_n1")

    def ours() -> int:
        return sum(scorer.score(e, ours_text[e.id]).valid for e in entries)

    def official() -> int:
        ok = 0
        for e in entries:
            try:
                decoded = default_decode_ast_prompting(official_text[e.id], ReturnFormat.PYTHON)
            except Exception:  # the official runner counts a decoding failure as "no call"
                decoded = None
            if decoded is None:
                ok += "irrelevance" in e.category
                continue
            ok += scorer.check_decoded(e, decoded).valid
        return ok

    timings = {}
    for name, fn in (("tooltune", ours), ("official", official)):
        best, passed = float("inf"), 0
        for _ in range(args.repeats):
            t = time.perf_counter()
            passed = fn()
            best = min(best, time.perf_counter() - t)
        timings[name] = (best, passed)
    n = len(entries)
    print(f"BFCL single-turn entries: {n} ({pinned}); best of {args.repeats}")
    for name, (sec, passed) in timings.items():
        print(f"  {name:9s} raw text -> verdict: {sec:6.3f} s  ({1e3 * sec / n:.3f} ms/entry), "
              f"passed {passed}/{n}")
    print(f"  ratio tooltune / official: {timings['tooltune'][0] / timings['official'][0]:.2f}x")
    print(f"  unpassable entries (bfcl.IMPOSSIBLE_ENTRIES): {len(bfcl.IMPOSSIBLE_ENTRIES)}")

    if args.multi_turn:
        from tooltune.evaluation.bfcl.multiturn import MultiTurnConfig, run_multi_turn, scripted_policy
        from tooltune.generation import ScriptedBackend
        from tooltune.schema import Scoring

        multi = bfcl.load_entries(bfcl.MULTI_TURN)
        got: list = []
        t = time.perf_counter()
        run_multi_turn(multi, ScriptedBackend(scripted_policy(multi)), MultiTurnConfig(),
                       lambda v, raw: got.append(v), scoring=Scoring.CORRECTED)
        sec = time.perf_counter() - t
        print(f"multi-turn scripted ground truth: {sum(v.valid for v in got)}/{len(got)} passed "
              f"in {sec:.1f} s (inference loop + official multi_turn_checker)")


if __name__ == "__main__":
    main()
