"""`tooltune data …`: prepare, synth, export, select, validate.

The options of `prepare` (PrepareConfig), `synth` (SynthConfig) and `select` (DifficultyConfig and the
backend, BackendConfig) are flags generated from those dataclasses: `--key value`, a bool as `--key`,
`--key false` or `--no-key`, a dict or list as YAML text. Heavy libraries are imported in the handlers.

Every handler checks what it was given (values, names, input files, the output path) before any work
and raises: `tooltune.cli` turns a user error into one line naming the option and exit status 2.
Output files get their missing parent folders.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tooltune import config as config_mechanism
from tooltune.config import ConfigError
from tooltune.data.pipeline import PrepareConfig
from tooltune.data.recipes import DifficultyConfig
from tooltune.data.sources import SOURCES
from tooltune.data.synthetic import SynthConfig
from tooltune.generation import BackendConfig
from tooltune.prompts import get_template, grammar_for, system_prompt_text

EXIT_FAILED_CHECK = 1
"""`data validate`: some ground truth does not score 1.0 (a finding, not an error)."""
EXIT_UNAVAILABLE = 2

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
    v.add_argument("--template", default="tool_n1",
                   help="registered template (or grammar) that renders and reads the answers")
    v.add_argument("--show", type=int, default=20, help="failures to print")
    v.set_defaults(func=_validate)


def _prompt_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--template", default="tool_n1", help="tool_n1 | r2if | bfcl | bfcl_strong | …")
    p.add_argument("--history", choices=("native", "context"), default="native")
    p.add_argument("--no-reasoning-history", action="store_true", help="drop earlier reasoning from history")
    p.add_argument("--system-prompt", default=None,
                   help="replace the template's system prompt: text ({tools} is filled in), a text file, "
                   "or a registered template's name (its system text)")


def _check_inputs(paths: list[str]) -> None:
    for path in paths:
        config_mechanism.require_file("--input", path)


def _prepare(args: argparse.Namespace) -> int:
    from tooltune.data.pipeline import format_table, prepare
    from tooltune.data.sources import SourceUnavailable

    given = config_mechanism.given_overrides(args)
    cfg = config_mechanism.load(PrepareConfig, args.config, given)
    config_mechanism.check_values(cfg)
    if args.source:
        cfg.sources = []
        for i, name in enumerate(args.source):
            spec = args.input[i] if i < len(args.input) else ("package" if name == "bfcl" else None)
            if spec is None:
                raise ConfigError(f"--source {name}: needs an --input (one --input per --source, in order)")
            cfg.sources.append((name, spec))
    if not cfg.sources or ("out" not in given and not args.config):
        raise ConfigError("prepare needs --source/--input pairs and --out (or a --config that gives them)")
    for entry in cfg.sources:
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2):
            raise ConfigError(f"sources: each entry is a pair [source name, input], got {entry!r}")
        name, spec = entry
        if name not in SOURCES:
            raise config_mechanism.unknown_name("--source", "source", name, SOURCES)
        if not (str(spec).startswith("hf:") or spec == "package" or Path(spec).expanduser().exists()):
            raise ConfigError(f"--input: not found: {spec} (a file, a folder or hf:<dataset id>)")
    config_mechanism.prepare_output(cfg.out, "--out" if "out" in given else "out", folder=True)
    try:
        stats = prepare(cfg)
    except SourceUnavailable as e:
        print(f"tooltune data prepare: {e}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    print(format_table(stats))
    print(f"wrote {cfg.out}/train.jsonl, val.jsonl, rejected.jsonl, stats.json")
    return 0


def _synth(args: argparse.Namespace) -> int:
    from tooltune.data.synthetic import write

    cfg = config_mechanism.load(SynthConfig, overrides=config_mechanism.given_overrides(args))
    config_mechanism.check_values(cfg)
    if cfg.min_distractors > cfg.max_distractors:
        raise ConfigError(f"min_distractors: must be <= max_distractors ({cfg.max_distractors}), "
                          f"got {cfg.min_distractors}")
    weights = cfg.weights
    for c in weights:
        if c not in SynthConfig().weights:
            raise config_mechanism.unknown_name("weights", "category", c, SynthConfig().weights)
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in weights.values()):
        raise ConfigError(f"weights: every weight must be a number >= 0, got {weights}")
    if args.categories:
        wanted = [c.strip() for c in args.categories.split(",") if c.strip()]
        for c in wanted:
            if c not in weights:
                raise config_mechanism.unknown_name("--categories", "category", c, weights)
        weights = {c: w for c, w in weights.items() if c in wanted}
    if not sum(weights.values()) > 0:
        raise ConfigError(f"weights: at least one category needs a weight > 0, got {weights}")
    cfg.weights = weights
    config_mechanism.prepare_output(args.out)
    n = write(cfg, args.out, args.format)
    print(f"wrote {n} {args.format} records to {args.out}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from tooltune.data.export import export

    get_template(args.template, "--template", "template")
    system_prompt = system_prompt_text(args.system_prompt, "--system-prompt")
    _check_inputs(args.input)
    config_mechanism.prepare_output(args.out, folder=args.format == "hf")
    n = export(
        args.input,
        args.format,
        args.out,
        template=args.template,
        history=args.history,
        keep_reasoning=not args.no_reasoning_history,
        system_prompt=system_prompt,
    )
    print(f"wrote {n} rows ({args.format}) to {args.out}")
    return 0


def _select(args: argparse.Namespace) -> int:
    from tooltune.data.recipes import balanced_set, difficulty_filter
    from tooltune.schema import read_jsonl, write_jsonl

    given = config_mechanism.given_overrides
    cfg = config_mechanism.load(DifficultyConfig, overrides=given(args, "difficulty"))
    backend_cfg = config_mechanism.load(BackendConfig, overrides=given(args, "backend"))
    backend_cfg.batch_size = cfg.batch_size or backend_cfg.batch_size  # 0 = one call: keep the model's
    if args.recipe == "difficulty":
        backend_cfg.source()
    if args.per_category is not None and args.per_category < 1:
        raise ConfigError(f"--per-category: must be >= 1, got {args.per_category}")
    _check_inputs(args.input)
    out = config_mechanism.prepare_output(args.out)
    rejected_path = f"{os.path.splitext(args.out)[0]}.rejected.jsonl"
    if args.recipe == "difficulty":
        config_mechanism.prepare_output(rejected_path, "--out")
        if cfg.cache:
            config_mechanism.prepare_output(cfg.cache, "--cache")
        backend_cfg.check_reachable()
    samples = [s for path in args.input for s in read_jsonl(path)]
    if args.recipe == "balanced":
        chosen, report = balanced_set(samples, args.per_category, seed=cfg.seed)
        write_jsonl(chosen, str(out))
        print(json.dumps(report))
        print(f"wrote {len(chosen)} samples to {args.out}")
        return 0
    backend = backend_cfg.build()
    kept, rejected, stats = difficulty_filter(samples, backend, cfg)
    write_jsonl(kept, str(out))
    with open(rejected_path, "w", encoding="utf-8") as f:
        for r in rejected:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(json.dumps(stats))
    print(f"kept {len(kept)} of {len(samples)} prompts -> {args.out}; rejected -> {rejected_path}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from tooltune.data.validate import SPLIT_FILES, validate_path

    grammar_for(args.template, "--template")
    path = Path(args.path).expanduser()
    if not path.exists():
        raise ConfigError(f"path: not found: {args.path} (a prepared folder or a canonical JSONL file)")
    if path.is_dir() and not any((path / f).is_file() for f in SPLIT_FILES):
        raise ConfigError(f"path: {args.path} holds no {' or '.join(SPLIT_FILES)} to validate")
    if args.show < 0:
        raise ConfigError(f"--show: must be >= 0, got {args.show}")
    report = validate_path(args.path, args.template)
    print(f"gold self-check ({report.template}): {report.passed}/{report.total} samples score 1.0")
    for f in report.failures[: args.show]:
        print(f"  FAIL {f['file']} {f['id']}: {f['completion'][:200]!r}")
    if len(report.failures) > args.show:
        print(f"  … and {len(report.failures) - args.show} more")
    return 0 if report.ok else EXIT_FAILED_CHECK
