"""CLI group `tooltune bench`: run a benchmark script from the project's `bench/` folder by name.

`tooltune bench NAME [ARGS...]` runs `bench/NAME.py` with ARGS; `tooltune bench --list` shows what is
there. The benchmarks live in the source tree, not in the installed package, so the folder is looked
up in this order: `--dir DIR`, the environment variable `TOOLTUNE_BENCH_DIR`, `./bench` in the current
directory, and the source checkout the package was installed from (editable installs).

Some scripts measure on their own (`make bench` runs those); others work on a run folder or a sweep file
and need arguments. Which is which is read from each script's argparse calls (`needs_arguments`), so a
new script is sorted without a list to keep.
"""

from __future__ import annotations

import argparse
import ast
import os
import runpy
import sys
from pathlib import Path
from typing import Any

from tooltune.config import ConfigError, unknown_name

ENV_VAR = "TOOLTUNE_BENCH_DIR"


def bench_dir(explicit: str | None = None) -> Path | None:
    """The first existing benchmark folder among the places listed in the module docstring; a folder
    given explicitly (option or environment variable) is the only candidate."""
    given = explicit or os.environ.get(ENV_VAR)
    candidates = [given] if given else ["bench", Path(__file__).resolve().parents[1] / "bench"]
    for c in candidates:
        if c and Path(c).is_dir() and any(Path(c).glob("*.py")):
            return Path(c)
    return None


def available(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def needs_arguments(script: Path) -> bool:
    """Whether `script` declares a required command-line argument: an `add_argument` call with a positional
    name or `required=True` (read from its source; nothing is run). A script that cannot be parsed counts
    as needing arguments, so it is never run without them."""
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"):
            continue
        first = node.args[0] if node.args else None
        positional = isinstance(first, ast.Constant) and isinstance(first.value, str)
        if positional and not first.value.startswith("-"):
            nargs = next((k.value for k in node.keywords if k.arg == "nargs"), None)
            if not (isinstance(nargs, ast.Constant) and nargs.value in ("?", "*")):
                return True
        for k in node.keywords:
            if k.arg == "required" and isinstance(k.value, ast.Constant) and k.value.value is True:
                return True
    return False


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help="run a benchmark from bench/ (efficiency: vanilla GRPO vs filtering + down-sampling)",
        description="Run bench/NAME.py with the given arguments, e.g. `tooltune bench efficiency --out DIR`. "
        "Each benchmark prints ratios measured side by side in one run.",
    )
    p.add_argument("name", nargs="?", help="benchmark name (a bench/NAME.py script)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    p.add_argument("--list", action="store_true", help="list the available benchmarks, those that need "
                   "arguments apart")
    p.add_argument("--standalone", action="store_true", help="with --list: only the names of the benchmarks "
                   "that run without arguments, one per line (`make bench` runs these)")
    p.add_argument("--dir", default=None, help=f"the bench/ folder (default: ${ENV_VAR}, ./bench, or the "
                   "source checkout)")
    p.set_defaults(func=_handle)


def _handle(args: argparse.Namespace) -> int:
    folder = bench_dir(args.dir)
    if folder is None:
        given = args.dir or os.environ.get(ENV_VAR)
        where = f"{given} is not a folder of benchmark scripts" if given else "no bench/ folder found"
        raise ConfigError(f"--dir: {where}; the benchmarks ship with the source repository: run from its "
                          f"root, or pass --dir or set {ENV_VAR}")
    names = available(folder)
    if args.list or not args.name:
        alone = [n for n in names if not needs_arguments(folder / f"{n}.py")]
        if args.standalone:
            print("\n".join(alone))
            return 0 if args.list else 2
        rest = [n for n in names if n not in alone]
        print(f"benchmarks in {folder}: " + (", ".join(alone) if alone else "none"))
        if rest:
            print("need arguments (a run folder or a sweep file; NAME --help): " + ", ".join(rest))
        return 0 if args.list else 2
    if args.name not in names:
        raise unknown_name("name", "benchmark", args.name, names)
    script = folder / f"{args.name}.py"
    old = sys.argv
    sys.argv = [str(script), *args.args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:  # the script's own exit status
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old
    return 0
