"""`tooltune eval {bfcl,apibank,acebench,compare,report}`: the stable evaluation command line.

    tooltune eval bfcl --predictions FILE.jsonl --template tool_n1 [--categories a,b] --out DIR
    tooltune eval bfcl --model PATH_OR_ID --seeds 3 --out DIR
    tooltune eval bfcl --endpoint http://localhost:8000/v1 --model-name NAME --out DIR
    tooltune eval apibank|acebench ... (same options, plus --data-dir)
    tooltune eval compare RUN_A RUN_B
    tooltune eval report RUN [RUN ...] --out report.md

Each evaluation writes DIR/verdicts.jsonl, DIR/summary.json, DIR/manifest.json and (unless
--no-report) DIR/report.md with a PNG bar chart. Heavy libraries are imported inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

BENCHMARK_HELP = {
    "bfcl": "BFCL with the official bfcl-eval checker (single-turn AST, relevance, multi-turn).",
    "apibank": "API-Bank level-1 / level-2 API-call accuracy.",
    "acebench": "ACEBench normal + special categories (agent categories need a user-simulator endpoint).",
}


def default_data_dir(benchmark: str) -> Path:
    env = os.environ.get("TOOLTUNE_SHARED_DATA")
    root = Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared" / "data"
    return root / benchmark


def _add_run_args(p: argparse.ArgumentParser, benchmark: str) -> None:
    src = p.add_argument_group("what produces the completions (one of)")
    src.add_argument("--predictions", help="replay raw completions: JSONL of {\"id\", \"result\"}; several "
                     "comma-separated files are scored as seeds 0, 1, ...")
    src.add_argument("--model", help="local Hugging Face model directory (or hub id) to generate with")
    src.add_argument("--endpoint", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1")
    src.add_argument("--scripted", action="store_true",
                     help="play back the ground truth (a self-check of the harness: expect 100%%)")
    p.add_argument("--model-name", help="model name sent to --endpoint (and recorded)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--template", default="tool_n1", help="prompt template / output grammar (default tool_n1)")
    p.add_argument("--categories", default=None, help="comma-separated categories (default: all)")
    if benchmark != "bfcl":
        p.add_argument("--data-dir", default=None, help=f"folder of the {benchmark} files "
                       f"(default $TOOLTUNE_SHARED_DATA/{benchmark} or ../shared/data/{benchmark})")
    p.add_argument("--seeds", type=int, default=3, help="number of seeds for generation (default 3)")
    p.add_argument("--resume", action="store_true", help="keep DIR/verdicts.jsonl and skip finished entries")
    p.add_argument("--partial", action="store_true",
                   help="with --predictions: skip entries without a prediction instead of failing them")
    ctl = p.add_argument_group("protocol controls (recorded in the manifest)")
    ctl.add_argument("--system-prompt", default=None,
                     help="system-prompt variant: a template name (e.g. bfcl_strong) or a text file")
    ctl.add_argument("--history", choices=("native", "context"), default="native")
    ctl.add_argument("--drop-reasoning", action="store_true", help="drop earlier turns' reasoning")
    ctl.add_argument("--mode", choices=("strict", "substring"), default="strict", help="parser format mode")
    if benchmark == "bfcl":
        ctl.add_argument("--name-style", choices=("dotted", "underscore"), default="dotted",
                         help="dotted function names shown as math.factorial or math_factorial")
    if benchmark == "acebench":
        usr = p.add_argument_group("user simulator for agent_multi_turn (skipped without one)")
        usr.add_argument("--user-endpoint", help="OpenAI-compatible base URL of the model playing the user")
        usr.add_argument("--user-model-name", help="model name sent to --user-endpoint")
        usr.add_argument("--user-api-key-env", default="OPENAI_API_KEY", help="env var holding its key")
    gen = p.add_argument_group("generation")
    gen.add_argument("--temperature", type=float, default=0.7, help="0 = greedy (default 0.7)")
    gen.add_argument("--max-new-tokens", type=int, default=512)
    gen.add_argument("--batch-size", type=int, default=16)
    gen.add_argument("--device", default=None, help="torch device for --model")
    gen.add_argument("--concurrency", type=int, default=8, help="parallel requests to --endpoint")
    gen.add_argument("--timeout", type=float, default=120.0)
    gen.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var holding the endpoint's key")
    p.add_argument("--no-report", action="store_true", help="skip DIR/report.md and the PNG chart")
    p.set_defaults(func=_run, benchmark=benchmark)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval", help="Evaluate on BFCL, API-Bank, ACEBench over seeds and controls.",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="eval_command", metavar="{bfcl,apibank,acebench,compare,report}")
    for name, text in BENCHMARK_HELP.items():
        _add_run_args(sub.add_parser(name, help=text, description=text), name)
    cmp_ = sub.add_parser("compare", help="score differences of two runs; flags non-comparable manifests")
    cmp_.add_argument("run_a")
    cmp_.add_argument("run_b")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp_.set_defaults(func=_compare)
    rep = sub.add_parser("report", help="Markdown report + PNG bar charts from run folders")
    rep.add_argument("runs", nargs="+")
    rep.add_argument("--out", required=True, help="report .md path (PNGs are written beside it)")
    rep.set_defaults(func=_report)


def _scripted(benchmark: str, args: argparse.Namespace, data_dir: Path | None) -> Any:
    from tooltune.evaluation.scripted import ground_truth_policy
    from tooltune.generation import ScriptedBackend

    return ScriptedBackend(ground_truth_policy(benchmark, args.template, args.categories, data_dir,
                                               getattr(args, "name_style", "dotted")), name="scripted")


def _backends(args: argparse.Namespace, data_dir: Path | None) -> list[tuple[int, Any]]:
    from tooltune.generation import HFBackend, OpenAIBackend, ReplayBackend

    chosen = [x for x in (args.predictions, args.model, args.endpoint, args.scripted) if x]
    if len(chosen) != 1:
        raise SystemExit("tooltune eval: give exactly one of --predictions, --model, --endpoint, --scripted")
    if args.predictions:
        return [(i, ReplayBackend(f.strip())) for i, f in enumerate(args.predictions.split(",")) if f.strip()]
    if args.scripted:
        return [(0, _scripted(args.benchmark, args, data_dir))]
    if args.model:
        backend: Any = HFBackend(args.model, batch_size=args.batch_size, device=args.device)
    else:
        if not args.model_name:
            raise SystemExit("tooltune eval: --endpoint needs --model-name")
        backend = OpenAIBackend(args.endpoint, args.model_name, concurrency=args.concurrency,
                                timeout=args.timeout, api_key=os.environ.get(args.api_key_env))
    return [(s, backend) for s in range(max(1, args.seeds))]


def _user_backend(args: argparse.Namespace, data_dir: Path | None) -> Any:
    """ACEBench's user simulator: --user-endpoint, or the scripted user with --scripted."""
    if args.benchmark != "acebench":
        return None
    from tooltune.evaluation import acebench
    from tooltune.generation import OpenAIBackend, ScriptedBackend

    if args.user_endpoint:
        if not args.user_model_name:
            raise SystemExit("tooltune eval acebench: --user-endpoint needs --user-model-name")
        return OpenAIBackend(args.user_endpoint, args.user_model_name, concurrency=args.concurrency,
                             timeout=args.timeout, api_key=os.environ.get(args.user_api_key_env))
    if args.scripted and data_dir is not None:
        entries = acebench.load_agent_entries(data_dir, acebench.AGENT_CATEGORIES)
        return ScriptedBackend(acebench.scripted_user_policy(entries), name="scripted-user")
    return None


def _run(args: argparse.Namespace) -> int:
    from tooltune.evaluation.protocol import Controls
    from tooltune.evaluation.report import write_report
    from tooltune.evaluation.runner import Sampling, evaluate

    data_dir = None
    if args.benchmark != "bfcl":
        data_dir = Path(args.data_dir) if args.data_dir else default_data_dir(args.benchmark)
        if not data_dir.is_dir():
            print(f"tooltune eval {args.benchmark}: data folder {data_dir} not found (--data-dir)",
                  file=sys.stderr)
            return 2
    system = args.system_prompt
    if system and os.path.isfile(system):
        system = Path(system).read_text(encoding="utf-8")
    controls = Controls(template=args.template, system_prompt=system, history=args.history,
                        keep_reasoning=not args.drop_reasoning, mode=args.mode,
                        name_style=getattr(args, "name_style", "dotted"))
    sampling = Sampling(temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                        batch_size=args.batch_size)
    model = args.model or args.model_name or args.predictions or ("scripted" if args.scripted else None)
    summary = evaluate(args.benchmark, _backends(args, data_dir), args.out, controls, args.categories,
                       sampling, data_dir, resume=args.resume, partial=args.partial, model=model,
                       user_backend=_user_backend(args, data_dir))
    if not args.no_report:
        write_report([args.out], Path(args.out) / "report.md")
    headline = {k.removeprefix("categories.").removesuffix(".accuracy"): round(v, 4)
                for k, v in summary["scores"].items()
                if k.endswith(".accuracy") or (not k.startswith("categories.") and k.count(".") <= 1)}
    print(json.dumps({"out": str(args.out), "seeds": summary["seeds"], **headline}, indent=2))
    for s in summary.get("skipped") or []:
        print(f"skipped: {s}", file=sys.stderr)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from tooltune.evaluation.protocol import compare_runs

    result = compare_runs(args.run_a, args.run_b)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0 if result["comparable"] else 1
    for b in result["blockers"]:
        a, b_ = json.dumps(b["a"])[:200], json.dumps(b["b"])[:200]
        print(f"NOT COMPARABLE: {b['field']} differs: {a} vs {b_}")
    for d in result["differences"]:
        print(f"compared: {d['field']}: {d['a']} vs {d['b']}")
    for k, v in result["scores"].items():
        if k.endswith(("accuracy", "overall", "non_live", "live", "hallucination", "multi_turn")):
            print(f"{k:55s} {100 * v['a']:7.2f} {100 * v['b']:7.2f} {100 * v['delta']:+7.2f}")
    print("comparable" if result["comparable"] else "runs are NOT comparable (see above)")
    return 0 if result["comparable"] else 1


def _report(args: argparse.Namespace) -> int:
    from tooltune.evaluation.report import write_report

    print(write_report(args.runs, args.out))
    return 0
