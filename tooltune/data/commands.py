"""`tooltune data …`: prepare, synth, export, select, validate."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

EXIT_BAD_INPUT = 1
EXIT_UNAVAILABLE = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help="Convert, filter, split and export tool-calling datasets.")
    sub = data.add_subparsers(dest="data_command", metavar="{prepare,synth,export,select,validate}")

    p = sub.add_parser("prepare", help="raw records -> clean single-step samples (Tool-N1 preprocessing)")
    # option defaults are None so that only what is typed overrides a --config YAML (PrepareConfig fields)
    p.add_argument(
        "--config", default=None, help="YAML with PrepareConfig fields (sources: [[name, input]], …)"
    )
    p.add_argument(
        "--source",
        action="append",
        default=None,
        help="xlam | toolace | bfcl | apibank | acebench | jsonl (repeat with --input for several)",
    )
    p.add_argument(
        "--input",
        action="append",
        default=[],
        help="file, folder or hf:<dataset id>, one per --source in order (bfcl defaults to the "
        "bfcl-eval package data)",
    )
    p.add_argument("--out", default=None, help="output folder")
    p.add_argument("--val-fraction", type=float, default=None, help="share of records for val (0.05)")
    p.add_argument("--seed", type=int, default=None, help="split and augmentation seed (0)")
    p.add_argument(
        "--no-call-samples",
        action="store_const",
        const=True,
        default=None,
        help="no-call samples at assistant text turns",
    )
    p.add_argument(
        "--irrelevance-augment",
        type=float,
        default=None,
        metavar="FRACTION",
        help="share of samples copied with the answer's tools removed, expecting no call (0)",
    )
    p.add_argument("--dedupe", action=argparse.BooleanOptionalAction, default=None, help="(on)")
    p.add_argument("--check-arguments", choices=("off", "unknown", "strict"), default=None, help="(unknown)")
    p.add_argument("--hub-split", default=None, help="split for hf:<id> inputs (train)")
    p.add_argument("--limit", type=int, default=None, help="records per source (for a quick look)")
    p.add_argument("--no-progress", action="store_const", const=False, default=None, dest="progress")
    p.set_defaults(func=_prepare)

    s = sub.add_parser("synth", help="generate synthetic tool-calling records (offline, seeded)")
    s.add_argument("--n", type=int, required=True)
    s.add_argument("--out", required=True, help="output JSONL file")
    s.add_argument("--format", choices=("canonical", "xlam", "toolace"), default="canonical")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--categories", default=None, help="comma-separated subset of categories")
    s.add_argument("--transform-rate", type=float, default=None)
    s.add_argument("--optional-rate", type=float, default=None)
    s.add_argument("--max-distractors", type=int, default=None)
    s.add_argument("--lookalike-rate", type=float, default=None)
    s.add_argument("--max-parallel", type=int, default=None)
    s.set_defaults(func=_synth)

    e = sub.add_parser("export", help="canonical JSONL -> jsonl | hf (TRL rows) | verl parquet")
    e.add_argument("--input", action="append", required=True)
    e.add_argument("--format", choices=("jsonl", "hf", "verl"), required=True)
    e.add_argument("--out", required=True)
    _prompt_args(e)
    e.set_defaults(func=_export)

    c = sub.add_parser("select", help="R2IF balanced set or policy-based difficulty filter")
    c.add_argument("--recipe", choices=("balanced", "difficulty"), required=True)
    c.add_argument("--input", action="append", required=True)
    c.add_argument("--out", required=True, help="output JSONL (rejected prompts go to <out>.rejected.jsonl)")
    c.add_argument("--per-category", type=int, default=None)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--backend", default="hf", help="generation backend kind for the difficulty filter")
    c.add_argument("--model", default=None, help="model path / name for the backend")
    c.add_argument(
        "--backend-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra backend keyword (value parsed as JSON when possible)",
    )
    c.add_argument("--k", type=int, default=8)
    c.add_argument("--temperature", type=float, default=1.0)
    c.add_argument("--max-new-tokens", type=int, default=512)
    c.add_argument("--low", type=float, default=0.0)
    c.add_argument("--high", type=float, default=1.0)
    c.add_argument("--batch-size", type=int, default=32)
    c.add_argument("--cache", default=None, help="resume file of per-prompt rewards")
    c.add_argument("--template", default="tool_n1")
    c.add_argument("--history", choices=("native", "context"), default="native")
    c.set_defaults(func=_select)

    v = sub.add_parser("validate", help="gold self-check: rendered ground truth must score binary reward 1.0")
    v.add_argument("path", help="prepared folder (train.jsonl, val.jsonl) or a canonical JSONL file")
    v.add_argument("--template", default="tool_n1")
    v.add_argument("--show", type=int, default=20, help="failures to print")
    v.set_defaults(func=_validate)


def _prompt_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--template", default="tool_n1", help="tool_n1 | r2if | bfcl | bfcl_strong | …")
    p.add_argument("--history", choices=("native", "context"), default="native")
    p.add_argument("--no-reasoning-history", action="store_true", help="drop earlier reasoning from history")
    p.add_argument("--system-prompt", default=None, help="replace the template's system prompt")


def _err(msg: str) -> None:
    print(f"tooltune data: {msg}", file=sys.stderr)


def _prepare(args: argparse.Namespace) -> int:
    from tooltune.data.pipeline import PrepareConfig, format_table, prepare
    from tooltune.data.sources import DataFileError, SourceUnavailable

    try:
        cfg = PrepareConfig.from_yaml(args.config) if args.config else PrepareConfig()
    except (OSError, TypeError, ValueError) as e:
        _err(f"--config {args.config}: {e}")
        return EXIT_BAD_INPUT
    if args.source:
        cfg.sources = []
        for i, name in enumerate(args.source):
            spec = args.input[i] if i < len(args.input) else ("package" if name == "bfcl" else None)
            if spec is None:
                _err(f"--source {name} needs an --input")
                return EXIT_BAD_INPUT
            cfg.sources.append((name, spec))
    for key in (
        "out",
        "val_fraction",
        "seed",
        "no_call_samples",
        "irrelevance_augment",
        "dedupe",
        "check_arguments",
        "hub_split",
        "limit",
        "progress",
    ):
        if getattr(args, key) is not None:
            setattr(cfg, key, getattr(args, key))
    if not cfg.sources or (not args.out and not args.config):
        _err("prepare needs --source/--input pairs and --out (or a --config that gives them)")
        return EXIT_BAD_INPUT
    try:
        stats = prepare(cfg)
    except (DataFileError, ValueError) as e:
        _err(str(e))
        return EXIT_BAD_INPUT
    except SourceUnavailable as e:
        _err(str(e))
        return EXIT_UNAVAILABLE
    print(format_table(stats))
    print(f"wrote {cfg.out}/train.jsonl, val.jsonl, rejected.jsonl, stats.json")
    return 0


def _synth(args: argparse.Namespace) -> int:
    from tooltune.data.synthetic import SynthConfig, write

    cfg = SynthConfig(n=args.n, seed=args.seed)
    for name in ("transform_rate", "optional_rate", "max_distractors", "lookalike_rate", "max_parallel"):
        if getattr(args, name) is not None:
            setattr(cfg, name, getattr(args, name))
    if args.categories:
        wanted = [c.strip() for c in args.categories.split(",") if c.strip()]
        unknown = [c for c in wanted if c not in cfg.weights]
        if unknown:
            _err(f"unknown categories {unknown}; choose from {list(cfg.weights)}")
            return EXIT_BAD_INPUT
        cfg.weights = {c: w for c, w in cfg.weights.items() if c in wanted}
    n = write(cfg, args.out, args.format)
    print(f"wrote {n} {args.format} records to {args.out}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from tooltune.data.export import export
    from tooltune.schema import SchemaError

    try:
        n = export(
            args.input,
            args.format,
            args.out,
            template=args.template,
            history=args.history,
            keep_reasoning=not args.no_reasoning_history,
            system_prompt=args.system_prompt,
        )
    except (SchemaError, FileNotFoundError) as e:
        _err(str(e))
        return EXIT_BAD_INPUT
    print(f"wrote {n} rows ({args.format}) to {args.out}")
    return 0


def _backend_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if args.model:
        kw[{"hf": "model_path", "replay": "predictions"}.get(args.backend, "model_name")] = args.model
    for item in args.backend_arg:
        key, _, value = item.partition("=")
        try:
            kw[key] = json.loads(value)
        except json.JSONDecodeError:
            kw[key] = value
    return kw


def _select(args: argparse.Namespace) -> int:
    from tooltune.data.recipes import DifficultyConfig, balanced_set, difficulty_filter
    from tooltune.schema import SchemaError, read_jsonl, write_jsonl

    try:
        samples = [s for path in args.input for s in read_jsonl(path)]
    except (SchemaError, FileNotFoundError) as e:
        _err(str(e))
        return EXIT_BAD_INPUT
    if args.recipe == "balanced":
        chosen, report = balanced_set(samples, args.per_category, seed=args.seed)
        write_jsonl(chosen, args.out)
        print(json.dumps(report))
        print(f"wrote {len(chosen)} samples to {args.out}")
        return 0
    from tooltune.generation import make_backend

    backend = make_backend(args.backend, **_backend_kwargs(args))
    cfg = DifficultyConfig(
        k=args.k,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        template=args.template,
        history=args.history,
        low=args.low,
        high=args.high,
        batch_size=args.batch_size,
        seed=args.seed,
        cache=args.cache,
    )
    kept, rejected, stats = difficulty_filter(samples, backend, cfg)
    write_jsonl(kept, args.out)
    base = os.path.splitext(args.out)[0]
    with open(f"{base}.rejected.jsonl", "w", encoding="utf-8") as f:
        for r in rejected:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(json.dumps(stats))
    print(f"kept {len(kept)} of {len(samples)} prompts -> {args.out}; rejected -> {base}.rejected.jsonl")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from tooltune.data.validate import validate_path
    from tooltune.schema import SchemaError

    try:
        report = validate_path(args.path, args.template)
    except (SchemaError, FileNotFoundError) as e:
        _err(str(e))
        return EXIT_BAD_INPUT
    print(f"gold self-check ({report.template}): {report.passed}/{report.total} samples score 1.0")
    for f in report.failures[: args.show]:
        print(f"  FAIL {f['file']} {f['id']}: {f['completion'][:200]!r}")
    if len(report.failures) > args.show:
        print(f"  … and {len(report.failures) - args.show} more")
    return 0 if report.ok else EXIT_BAD_INPUT
