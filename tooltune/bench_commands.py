"""CLI group `tooltune bench`: `tooltune bench efficiency [--out DIR]`, or any bench/NAME.py by name.

`tooltune bench NAME [ARGS...]` runs the script `bench/NAME.py` of the source checkout with ARGS (the
benchmarks live beside the package, not inside it); `tooltune bench --list` shows what is there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"


def available() -> list[str]:
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if not p.stem.startswith("_"))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help="run a benchmark from bench/ (efficiency: vanilla GRPO vs filtering + down-sampling)",
        description="Run bench/NAME.py with the given arguments, e.g. `tooltune bench efficiency --out DIR`. "
        "Each benchmark prints ratios measured side by side in one run.",
    )
    p.add_argument("name", nargs="?", help="benchmark name (a bench/NAME.py script)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    p.add_argument("--list", action="store_true", help="list the available benchmarks")
    p.set_defaults(func=_handle)


def _handle(args: argparse.Namespace) -> int:
    import runpy

    names = available()
    if args.list or not args.name:
        print("benchmarks: " + (", ".join(names) if names else f"none found in {BENCH_DIR}"))
        return 0 if args.list else 2
    if args.name not in names:
        print(
            f"tooltune bench: unknown benchmark {args.name!r}; available: {', '.join(names)}", file=sys.stderr
        )
        return 2
    script = BENCH_DIR / f"{args.name}.py"
    old = sys.argv
    sys.argv = [str(script), *args.args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:  # the script's own exit status
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old
    return 0
