"""Benchmark: `tooltune data prepare` on 60,000 raw xLAM records and 10,000 ToolACE dialogues.

Targets: 60k xLAM-format records prepared in <= 30 s on one core with peak memory <= 1.5 GB;
10k ToolACE dialogues likewise. Inputs come from the offline synthetic generator in the raw formats.
Each run happens in a child process pinned to one CPU core; wall time, CPU time and the child's peak
RSS (getrusage ru_maxrss) are reported side by side with the budgets, plus the same xLAM run with the
tool-spec cache disabled (what the memoization buys).

    python bench/data_prepare.py                  # full size
    python bench/data_prepare.py --xlam 6000 --toolace 1000   # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

WALL_BUDGET_S = 30.0
RSS_BUDGET_MB = 1536.0


def worker(source: str, path: str, out: str, no_cache: bool) -> None:
    """Runs in the child: pin to one core, prepare, print measurements as JSON."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from tooltune.data.pipeline import PrepareConfig, prepare
    from tooltune.data.sources import base

    if no_cache:
        from tooltune.data.sources.types import tool_spec_from_source

        base._spec = tool_spec_from_source
    t0, c0 = time.perf_counter(), time.process_time()
    stats = prepare(PrepareConfig(sources=[(source, path)], out=out, progress=False))[source]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    print(
        json.dumps(
            {
                "records": stats.records_in,
                "kept": stats.samples_kept,
                "wall": wall,
                "cpu": cpu,
                "rss_mb": rss_mb,
            }
        )
    )


def run_child(source: str, path: str, out: str, no_cache: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--worker", source, path, out] + (["--no-cache"] if no_cache else [])
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--xlam", type=int, default=60_000)
    ap.add_argument("--toolace", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--no-cache", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker, no_cache=args.no_cache)
        return
    from tooltune.data.synthetic import SynthConfig, write

    work = args.workdir or tempfile.mkdtemp(prefix="bench_data_")
    rows = []
    for fmt, n in (("xlam", args.xlam), ("toolace", args.toolace)):
        path = os.path.join(work, f"{fmt}.jsonl")
        t0 = time.perf_counter()
        write(SynthConfig(n=n, seed=args.seed), path, fmt)
        print(f"generated {n} synthetic {fmt} records in {time.perf_counter() - t0:.1f} s -> {path}")
        rows.append((f"{fmt} ({n} records)", run_child(fmt, path, os.path.join(work, f"out_{fmt}"))))
        if fmt == "xlam":
            rows.append(
                ("xlam, no tool-spec cache", run_child(fmt, path, os.path.join(work, "out_nc"), True))
            )
    print()
    cols = ("kept", "wall s", "cpu s", "rec/s", "wall/30s", "RSS MB", "RSS/1.5GB")
    head = f"{'case':28} " + " ".join(f"{c:>{max(7, len(c))}}" for c in cols)
    print(head)
    print("-" * len(head))
    for name, r in rows:
        print(
            f"{name:28} {r['kept']:>7} {r['wall']:>7.1f} {r['cpu']:>7.1f} {r['records'] / r['wall']:>7.0f} "
            f"{r['wall'] / WALL_BUDGET_S:>8.2f} {r['rss_mb']:>7.0f} {r['rss_mb'] / RSS_BUDGET_MB:>9.2f}"
        )
    base, nocache = rows[0][1], rows[1][1]
    print(f"\ntool-spec cache speed-up (cpu, no cache / cache): {nocache['cpu'] / base['cpu']:.2f}x")
    ok = all(
        r["wall"] <= WALL_BUDGET_S and r["rss_mb"] <= RSS_BUDGET_MB for n, r in rows if "no tool" not in n
    )
    print("within budget (30 s, 1.5 GB):", "yes" if ok else "NO")


if __name__ == "__main__":
    main()
