"""`tooltune eval {bfcl,apibank,acebench,compare,report}`: the stable evaluation command line.

    tooltune eval bfcl --predictions FILE.jsonl --template tool_n1 [--categories a,b] --out DIR
    tooltune eval bfcl --model PATH_OR_ID --seeds 3 --out DIR
    tooltune eval bfcl --endpoint http://localhost:8000/v1 --model-name NAME --out DIR
    tooltune eval apibank|acebench ... (same options, plus --data-dir or $TOOLTUNE_DATA_DIR)
    tooltune eval compare RUN_A RUN_B
    tooltune eval report RUN [RUN ...] --out report.md

Each evaluation writes DIR/verdicts.jsonl, DIR/summary.json, DIR/manifest.json, DIR/run.json and
(unless --no-report) DIR/report.md with a PNG bar chart. DIR is new or empty, or holds the same run
and --resume continues it; it is locked while the command writes. A folder holding another run (or
this run without --resume) and a folder another process is writing are one-line errors with exit
status 2; the folder is checked before the benchmark's data, and a run that fails removes the folder
it created (unless it holds results to resume). The flags of a benchmark command are generated from
the dataclasses behind them (RunOptions, the benchmark's Controls, Sampling, BackendConfig), so their
help and defaults are the library's; this module turns the flags into those objects (and into the user
simulator's backend) and hands `runner.evaluate` one `EvalOptions`. Heavy libraries are imported inside
the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from tooltune import config as config_mechanism
from tooltune.config import ConfigError
from tooltune.evaluation.benchmark import BENCHMARKS, Benchmark, SimulatesUsers
from tooltune.evaluation.comparison import compare_runs
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.failures import FailurePolicy, TooManyFailures, failure_line
from tooltune.evaluation.manifest import RETIRED_IDENTITY
from tooltune.evaluation.options import EvalOptions, RunOptions
from tooltune.evaluation.r2if_ace import AceOptions, evaluate_ace
from tooltune.evaluation.runner import evaluate
from tooltune.evaluation.scripted import ground_truth_policy
from tooltune.evaluation.subset import describe_subset
from tooltune.generation import Backend, BackendConfig, Sampling, ScriptedBackend
from tooltune.rundir import RunLock, check_identity, removed_on_failure, write_identity

ACE_HELP = ("R2IF's ACE (mean R_cer) of a model's completions on a benchmark's single-turn entries, "
            "measured with a student model.")
EXIT_FAILED = 3
"""Exit status of a run that entries failing to generate stopped (`FailurePolicy`)."""
STUDENT_FLAGS = ("model", "endpoint", "model_name", "device", "dtype", "batch_size", "api_key_env",
                 "concurrency", "timeout", "retries")
"""BackendConfig fields of the CER student, given as --student-model, --student-endpoint, ..."""
USER_FLAGS = ("endpoint", "model_name", "api_key_env")
"""BackendConfig fields of a benchmark's user simulator, given as --user-endpoint, --user-model-name, ..."""
USER_SHARES = ("concurrency", "timeout", "retries")
"""BackendConfig fields the user simulator takes from the evaluated model's backend."""


def _add_run_args(p: argparse.ArgumentParser, bench: Benchmark) -> None:
    add = config_mechanism.add_arguments
    add(p, RunOptions, exclude=() if bench.uses_data_dir else ("data_dir",), group="run")
    p.add_argument("--scripted", action="store_true",
                   help="play back the ground truth instead of a backend (a self-check of the harness: "
                        "expect 100%% under --scoring corrected; under official, the benchmark's own "
                        "failures of its ground truth, docs/evaluation.md)")
    add(p, BackendConfig, exclude=("batch_size",), group="backend",
        title="what produces the completions (exactly one of --model, --endpoint, --predictions, "
              "--scripted); a local model generates --batch-size prompts at once")
    add(p, bench.controls_type, group="controls", title="protocol controls (recorded in the manifest)")
    add(p, Sampling, group="sampling", title="sampling (recorded in the manifest)")
    add(p, FailurePolicy, group="failures",
        title="entries that fail to generate (scored as missing answers; exit status 3 when these stop the "
              "run)")
    if isinstance(bench, SimulatesUsers):
        add(p, BackendConfig, only=USER_FLAGS, flag_prefix="user-", group="user",
            title=f"user simulator for {', '.join(bench.user_categories)} (skipped without one; shares "
                  f"{', '.join('--' + k for k in USER_SHARES)})")
    p.set_defaults(func=_removing_a_failed_out(_evaluate), benchmark=bench.name)


def _add_ace_args(p: argparse.ArgumentParser) -> None:
    add = config_mechanism.add_arguments
    p.add_argument("--benchmark", required=True, choices=BENCHMARKS.names(),
                   help="the benchmark whose single-turn entries are measured")
    # ACE runs on every single-turn entry: no subset options
    add(p, RunOptions, exclude=("report", "subset", "subset_seed", "subset_ids"), group="run")
    add(p, BackendConfig, exclude=("batch_size",), group="backend",
        title="the evaluated model's completions (exactly one of --predictions FILE[,FILE...] (one per "
              "seed), --model, --endpoint)")
    controls = p.add_argument_group("protocol controls: those the completions were made under")
    add(controls, Controls, group="controls")
    shared = {f.name for f in fields(Controls)}
    for bench in BENCHMARKS.values():  # a benchmark's own controls (BFCL's --name-style), once each
        own = [f.name for f in fields(bench.controls_type) if f.name not in shared]
        add(controls, bench.controls_type, only=own, group="controls")
        shared.update(own)
    add(p, Sampling, group="sampling")
    add(p, BackendConfig, only=STUDENT_FLAGS, flag_prefix="student-", group="student",
        title="the student (exactly one of --student-model, --student-endpoint)")
    add(p, AceOptions, group="ace", title="ACE / CER settings (recorded in the manifest)")
    p.set_defaults(func=_removing_a_failed_out(_measure_ace), benchmark=None)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval", help="Evaluate on BFCL, API-Bank, ACEBench over seeds and controls.",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = BENCHMARKS.names()
    commands = ",".join((*names, "ace", "compare", "report"))
    sub = parser.add_subparsers(dest="eval_command", metavar="{" + commands + "}")
    for name in names:
        bench = BENCHMARKS[name]
        _add_run_args(sub.add_parser(name, help=bench.help, description=bench.help), bench)
    _add_ace_args(sub.add_parser("ace", help=ACE_HELP, description=ACE_HELP))
    cmp_ = sub.add_parser("compare", help="score differences of two runs; flags non-comparable manifests")
    cmp_.add_argument("run_a")
    cmp_.add_argument("run_b")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp_.set_defaults(func=_compare)
    rep = sub.add_parser("report", help="Markdown report + PNG bar charts from run folders")
    rep.add_argument("runs", nargs="+")
    rep.add_argument("--out", required=True, help="report .md path (PNGs are written beside it)")
    rep.set_defaults(func=_report)


def _configs(args: argparse.Namespace, bench: Benchmark
             ) -> tuple[RunOptions, Controls, Sampling, BackendConfig]:
    """The run's configs from the flags the user typed over the dataclass defaults; the controls are
    `bench`'s own (`Benchmark.controls_type`)."""
    given = config_mechanism.given_overrides
    opts = config_mechanism.load(RunOptions, overrides=given(args, "run"))
    controls = _controls(args, bench)
    sampling = config_mechanism.load(Sampling, overrides=given(args, "sampling"))
    backend = config_mechanism.load(BackendConfig, overrides=given(args, "backend"))
    backend.batch_size = sampling.batch_size or backend.batch_size  # 0 = one call: keep the model's
    if not opts.out:
        raise ConfigError("out: the output folder is required (--out DIR)")
    opts.validate()
    config_mechanism.prepare_output(opts.out, "--out", folder=True)
    return opts, controls, sampling, backend


def _controls(args: argparse.Namespace, bench: Benchmark) -> Controls:
    """`bench`'s controls from the flags; a flag of another benchmark's own controls (`tooltune eval ace
    --name-style` for API-Bank) is refused, naming the benchmarks that have it."""
    given = config_mechanism.given_overrides(args, "controls")
    own = {f.name for f in fields(bench.controls_type)}
    for key in sorted(set(given) - own):
        having = [b.name for b in BENCHMARKS.values() if key in {f.name for f in fields(b.controls_type)}]
        raise ConfigError(f"controls.{key}: an option of {', '.join(having)}, not of {bench.name}")
    return config_mechanism.load(bench.controls_type, overrides=given)


def _user_backend(args: argparse.Namespace, bench: Benchmark, backend: BackendConfig,
                  data_dir: Path | None) -> Backend | None:
    """The user simulator of a `SimulatesUsers` benchmark: the --user-* endpoint (sharing the model
    backend's USER_SHARES), or with --scripted the benchmark's scripted user; None otherwise."""
    if not isinstance(bench, SimulatesUsers):
        return None
    given = config_mechanism.given_overrides(args, "user")
    if given:
        shared = {k: getattr(backend, k) for k in USER_SHARES}
        user = config_mechanism.load(BackendConfig, base=shared, overrides=given)
        if not user.endpoint:
            raise ConfigError("user.endpoint: the user simulator needs --user-endpoint URL")
        if not user.model_name:
            raise ConfigError("user.model_name: --user-endpoint needs --user-model-name NAME")
        return user.build()
    return bench.scripted_user(data_dir) if args.scripted else None


def _backends(args: argparse.Namespace, opts: RunOptions, controls: Controls, backend: BackendConfig,
              data_dir: Path | None) -> list[tuple[int, Any]]:
    if args.scripted:
        if backend.sources():
            raise ConfigError(f"backend: --scripted plays the ground truth; drop --{backend.sources()[0]}")
        policy = ground_truth_policy(args.benchmark, categories=opts.categories or None, data_dir=data_dir,
                                     controls=controls)
        return [(0, ScriptedBackend(policy, name="scripted"))]
    return backend.seed_backends(opts.seeds)


def _given_out(args: argparse.Namespace) -> str | None:
    """The --out folder as typed (None when not given)."""
    return config_mechanism.given_overrides(args, "run").get("out") or None


def _check_out_first(out: str, fields: dict[str, Any]) -> None:
    """Refuse at once an output folder that holds another command's or benchmark's run (or files of
    no run), before the data folder, the model or the predictions are looked at; the whole identity,
    and --resume, are checked when the run starts."""
    check_identity(out, fields, resume=True, subset=True)


Command = Callable[[argparse.Namespace], int]


def _removing_a_failed_out(command: Command) -> Command:
    """`command` (`tooltune eval <benchmark>`, `tooltune eval ace`) run so that a failed run removes the
    output folder it created (unless it holds results to resume)."""

    def run(args: argparse.Namespace) -> int:
        out = _given_out(args)
        if out is None:
            return command(args)
        with removed_on_failure(out):
            return command(args)

    return run


def _evaluate(args: argparse.Namespace) -> int:
    from tooltune.evaluation.report import write_report

    bench = BENCHMARKS[args.benchmark]
    opts, controls, sampling, backend = _configs(args, bench)
    _check_out_first(opts.out, {"command": "eval", "benchmark": args.benchmark})
    data_dir = bench.data_dir(opts.data_dir)
    backends = _backends(args, opts, controls, backend, data_dir)
    user_backend = _user_backend(args, bench, backend, data_dir)
    model = "scripted" if args.scripted else backend.label
    given = config_mechanism.given_overrides(args, "failures")
    failures = config_mechanism.load(FailurePolicy, overrides=given)
    if failures.retry_failed and not opts.resume:
        raise ConfigError("retry_failed: --retry-failed generates the failed entries of a run again; it "
                          "needs --resume")
    with RunLock(opts.out):  # the report is written under the same lock as the results
        try:
            options = EvalOptions.of(opts, controls=controls, sampling=sampling, failures=failures,
                                     model=model, user_backend=user_backend)
            summary = evaluate(args.benchmark, backends, options)
        except TooManyFailures as e:
            print(f"tooltune eval {args.benchmark}: {e}", file=sys.stderr)
            return EXIT_FAILED
        if opts.report:
            write_report([opts.out], Path(opts.out) / "report.md")
    headline = {k.removeprefix("categories.").removesuffix(".accuracy"): round(v, 4)
                for k, v in summary["scores"].items()
                if k.endswith(".accuracy") or (not k.startswith("categories.") and k.count(".") <= 1)}
    errors = summary.get("standard_errors") or {}
    se = {k.removeprefix("categories.").removesuffix(".accuracy"): round(errors[k], 4)
          for k in summary["scores"] if k in errors and
          (k.endswith(".accuracy") or (not k.startswith("categories.") and k.count(".") <= 1))}
    shown = {"out": str(opts.out), "seeds": summary["seeds"], "scoring": controls.scoring,
             "entries": describe_subset(summary.get("subset")), **headline, "standard_errors": se}
    print(json.dumps(shown, indent=2))
    for s in summary.get("skipped") or []:
        print(f"skipped: {s}", file=sys.stderr)
    line = failure_line(summary)
    if line:
        print(line, file=sys.stderr)
    return 0


def _measure_ace(args: argparse.Namespace) -> int:
    given = config_mechanism.given_overrides
    opts, controls, sampling, backend = _configs(args, BENCHMARKS[args.benchmark])
    _check_out_first(opts.out, {"command": "eval ace", "benchmark": args.benchmark})
    student = config_mechanism.load(BackendConfig, overrides=given(args, "student"))
    student.source()
    options = config_mechanism.load(AceOptions, overrides=given(args, "ace")).validate()
    data_dir = BENCHMARKS[args.benchmark].data_dir(opts.data_dir)
    backends = backend.seed_backends(opts.seeds)
    # predictions measure the entries they hold (the student runs on no other), as --partial does for eval
    partial = opts.partial or backend.source() == "predictions"
    identity = {"command": "eval ace", "benchmark": args.benchmark, "model": backend.label,
                "student": student.label, "categories": opts.categories, "controls": asdict(controls),
                "sampling": asdict(sampling), "ace": asdict(options), "seeds": opts.seeds}
    with RunLock(opts.out):
        if not check_identity(opts.out, identity, opts.resume, retired=RETIRED_IDENTITY):
            write_identity(opts.out, identity)
        summary = evaluate_ace(args.benchmark, backends, student, opts.out, controls,
                               opts.categories or None, options, sampling, data_dir, resume=opts.resume,
                               partial=partial, model=backend.label)
    print(json.dumps({"out": str(opts.out), "seeds": summary["seeds"], "ace": summary["scores"].get("ace"),
                      "left_out": sorted(summary["left_out"])}, indent=2))
    return 0


def _compare(args: argparse.Namespace) -> int:
    result = compare_runs(args.run_a, args.run_b)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0 if result["comparable"] else 1
    for b in result["blockers"]:
        a, b_ = json.dumps(b["a"])[:200], json.dumps(b["b"])[:200]
        print(f"NOT COMPARABLE: {b['field']} differs: {a} vs {b_}")
    for d in result["differences"]:
        print(f"compared: {d['field']}: {d['a']} vs {d['b']}")
    paired = (result.get("paired") or {}).get("scores", {})
    if result.get("paired"):
        p = result["paired"]
        print(f"paired over the {p['units']} units both runs scored (only A: {p['only_a']}, only B: "
              f"{p['only_b']}); SE and z of B - A over entries")
    print(f"{'score':55s} {'A':>7s} {'B':>7s} {'B - A':>7s} {'SE':>6s} {'z':>6s}")
    for k, v in result["scores"].items():
        if k.endswith(("accuracy", "overall", "non_live", "live", "hallucination", "multi_turn")):
            d = paired.get(k) or {}
            se = f"{100 * d['se']:6.2f}" if d.get("se") is not None else f"{'–':>6s}"
            z = f"{d['z']:+6.2f}" if d.get("z") is not None else f"{'–':>6s}"
            print(f"{k:55s} {100 * v['a']:7.2f} {100 * v['b']:7.2f} {100 * v['delta']:+7.2f} {se} {z}")
    print("comparable" if result["comparable"] else "runs are NOT comparable (see above)")
    return 0 if result["comparable"] else 1


def _report(args: argparse.Namespace) -> int:
    from tooltune.evaluation.report import write_report

    config_mechanism.prepare_output(args.out)
    print(write_report(args.runs, args.out))
    return 0
