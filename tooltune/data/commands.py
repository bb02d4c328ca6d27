"""`tooltune data …`: prepare, synth, export, select, validate.

The options of `prepare` (PrepareConfig), `synth` (SynthConfig) and `select` (DifficultyConfig and the
backend, BackendConfig) are flags generated from those dataclasses: `--key value`, a bool as `--key`,
`--key false` or `--no-key`, a dict or list as YAML text. Heavy libraries are imported in the handlers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tooltune import config as config_mechanism
from tooltune.config import ConfigError
from tooltune.data.pipeline import PrepareConfig
from tooltune.data.recipes import DifficultyConfig
from tooltune.data.synthetic import SynthConfig
from tooltune.generation import BackendConfig
from tooltune.models import ModelLoadError

EXIT_BAD_INPUT = 1
EXIT_UNAVAILABLE = 2
EXIT_USAGE = 2
"""A configuration error (a bad flag value, key or --config file), as for `tooltune train` and `eval`."""


def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help="Convert, filter, split and export tool-calling datasets.")
    sub = data.add_subparsers(dest="data_command", metavar="{prepare,synth,export,select,validate}")

    p = sub.add_parser("prepare", help="raw records -> clean single-step samples (Tool-N1 preprocessing)")
    p.add_argument(
        "--config", default=None, help="YAML with PrepareConfig fields (sources: [[name, input]], …); "
        "the flags below override it"
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
    config_mechanism.add_arguments(p, PrepareConfig, exclude=("sources",))
    p.set_defaults(func=_prepare)

    s = sub.add_parser("synth", help="generate synthetic tool-calling records (offline, seeded)")
    s.add_argument("--out", required=True, help="output JSONL file")
    s.add_argument("--format", choices=("canonical", "xlam", "toolace"), default="canonical")
    s.add_argument("--categories", default=None, help="comma-separated subset of the categories of --weights")
    config_mechanism.add_arguments(s, SynthConfig, title="generator (SynthConfig)")
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
    c.add_argument("--per-category", type=int, default=None, help="balanced: samples per category "
                   "(default: as many as the rarest category has)")
    config_mechanism.add_arguments(c, DifficultyConfig, group="difficulty",
                                   title="difficulty filter (--seed also seeds the balanced draw)")
    config_mechanism.add_arguments(
        c, BackendConfig, exclude=("batch_size",), group="backend",
        title="reference policy of the difficulty filter (exactly one of --model, --endpoint, "
              "--predictions; a local model generates --batch-size prompts at once)")
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
    from tooltune.data.pipeline import format_table, prepare
    from tooltune.data.sources import DataFileError, SourceUnavailable

    given = config_mechanism.given_overrides(args)
    try:
        cfg = config_mechanism.load(PrepareConfig, args.config, given)
    except ConfigError as e:
        _err(str(e))
        return EXIT_USAGE
    if args.source:
        cfg.sources = []
        for i, name in enumerate(args.source):
            spec = args.input[i] if i < len(args.input) else ("package" if name == "bfcl" else None)
            if spec is None:
                _err(f"--source {name} needs an --input")
                return EXIT_BAD_INPUT
            cfg.sources.append((name, spec))
    if not cfg.sources or ("out" not in given and not args.config):
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
    from tooltune.data.synthetic import write

    try:
        cfg = config_mechanism.load(SynthConfig, overrides=config_mechanism.given_overrides(args))
    except ConfigError as e:
        _err(str(e))
        return EXIT_USAGE
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


def _select(args: argparse.Namespace) -> int:
    from tooltune.data.recipes import balanced_set, difficulty_filter
    from tooltune.schema import SchemaError, read_jsonl, write_jsonl

    given = config_mechanism.given_overrides
    try:
        cfg = config_mechanism.load(DifficultyConfig, overrides=given(args, "difficulty"))
        backend_cfg = config_mechanism.load(BackendConfig, overrides=given(args, "backend"))
        backend_cfg.batch_size = cfg.batch_size or backend_cfg.batch_size  # 0 = one call: keep the model's
        if args.recipe == "difficulty":
            backend_cfg.source()
    except ConfigError as e:
        _err(f"select: {e}")
        return EXIT_USAGE
    try:
        samples = [s for path in args.input for s in read_jsonl(path)]
    except (SchemaError, FileNotFoundError) as e:
        _err(str(e))
        return EXIT_BAD_INPUT
    if args.recipe == "balanced":
        chosen, report = balanced_set(samples, args.per_category, seed=cfg.seed)
        write_jsonl(chosen, args.out)
        print(json.dumps(report))
        print(f"wrote {len(chosen)} samples to {args.out}")
        return 0
    try:
        backend = backend_cfg.build()
    except ModelLoadError as e:
        _err(f"select: {e}")
        return EXIT_USAGE
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
