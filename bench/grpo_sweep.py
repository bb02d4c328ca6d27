"""A short GRPO sweep from one SFT warm start: each arm a branch of a quickstart run, judged on validation.

Every arm is `tooltune quickstart --branch-from SOURCE` with its own `train.grpo.*`, `train.reward.*`,
`train.filter.*` or `train.downsample.*` settings and `train.grpo.max_steps` from the sweep file (or
`--steps`, so one file serves runs of several lengths),
stopped after its GRPO stage: the same warm start, data and validation split for all arms, so they
differ only in what the sweep file says. An arm is judged by what its own run measured, never by a benchmark:

- validation: greedy exact match (the binary reward) on the run's validation split before GRPO and at
  its end (`train.diagnostics`), with its standard error;
- signal: the share of groups with a reward spread (1 - TRL's `frac_reward_zero_std`), the training
  reward of the first and last steps, token entropy, truncated completions;
- cost: training CPU and wall seconds (held-out evaluations excluded).

An arm that diverges (non-finite loss, reward or entropy collapse: `tooltune.training.guard`) is
stopped by its run and marked so in the table, not ranked. Arms already finished are read back, so a
killed sweep resumes with the same command. Writes OUT/sweep.json, OUT/sweep.md and OUT/sweep.png.

    python bench/grpo_sweep.py --source runs/real --out runs/sweep --arms configs/sweeps/real_smollm2.yaml
    python bench/grpo_sweep.py ... --only lr_1e-5,lr_3e-5     # some arms
    python bench/grpo_sweep.py ... --steps 16 --out runs/sweep16  # every arm for 16 steps
    python bench/grpo_sweep.py ... --report                   # the table from the arms finished so far
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tooltune.experiment.branch import BRANCH_KEYS  # noqa: E402 (after the path insert)
from tooltune.training.report import binomial_se  # noqa: E402


def read_arms(path: Path) -> tuple[int, dict[str, dict[str, Any]]]:
    """(steps per arm, {arm name: {dotted key: value}}) from a sweep file; ValueError naming the problem."""
    spec = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    steps, arms = spec.get("steps"), spec.get("arms")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"{path}: `steps` must be a positive integer (GRPO steps per arm), got {steps!r}")
    if not isinstance(arms, dict) or not arms:
        raise ValueError(f"{path}: `arms` must map arm names to their settings")
    for name, settings in arms.items():
        if not isinstance(settings, dict):
            raise ValueError(f"{path}: arm {name!r} must be a mapping of dotted settings")
        bad = [k for k in settings if not str(k).startswith(BRANCH_KEYS)]
        if bad:
            allowed = ", ".join(k + "*" for k in BRANCH_KEYS)
            raise ValueError(f"{path}: arm {name!r} sets {', '.join(bad)}; an arm may set only {allowed} "
                             "(the warm start it shares reads the rest)")
    return steps, arms


def run_arm(source: Path, out: Path, steps: int, settings: dict[str, Any], threads: int) -> dict[str, Any]:
    """Branch `out` from `source` with `settings`, run its stages up to GRPO (the real profile's screen of
    GRPO's prompts, then GRPO; resumed if begun); GRPO's result, with the screen's under "screen"."""
    import torch

    from tooltune.experiment.branch import branch, branch_point
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.real import real_profile
    from tooltune.experiment.screen import screen_settings
    from tooltune.experiment.synthetic import synthetic_profile

    # `threads` is the source's setting (part of the run's identity); this process's torch threads are
    # set below without changing it
    cfg = arm_config(source / "config.yaml", steps, settings)
    profile = real_profile() if cfg.profile == "real" else synthetic_profile()
    pipe = Pipeline(out, cfg, say=lambda line: print(f"[{out.name}] {line}", flush=True), profile=profile)
    branch(pipe, source)
    if cfg.profile == "real" and cfg.screen.enabled:
        sibling = seed_screen(out, screen_settings(pipe))
        if sibling is not None:
            print(f"[{out.name}] screen answers from arm {sibling.name} (same screen settings); their "
                  "cost counts in this arm's screen", flush=True)
    torch.set_num_threads(threads)
    stages = profile.stages
    for stage in stages[branch_point(stages, cfg.profile): stages.index("grpo") + 1]:
        pipe.run_stage(stage)
    return read_arm(out)


def arm_config(config: Path, steps: int, settings: dict[str, Any]) -> Any:
    """The quickstart config at `config` with an arm's `settings` and `steps` GRPO steps, as the command line
    would set them; ConfigError naming a key or value the config does not accept."""
    from tooltune.experiment.config import load_config

    overrides: list[str] = ["--train.grpo.max_steps", str(steps)]
    for key, value in settings.items():
        overrides += [f"--{key}", value if isinstance(value, str) else json.dumps(value)]
    return load_config(config, overrides)


def seed_screen(out: Path, settings: dict[str, Any]) -> Path | None:
    """Seed arm `out`'s screen cache (OUT/ARM/screen/rewards.jsonl) from a sibling arm whose screen ran with
    equal `settings` (`tooltune.experiment.screen.screen_settings`): the arms share one warm start, so
    the answers would be the same. The sibling's folder, or None where there is none or `out` has its own."""
    mine = out / "screen" / "rewards.jsonl"
    if mine.exists():
        return None
    for stage in sorted(out.parent.glob("*/stages/screen.json")):
        sibling = stage.parent.parent
        cache = sibling / "screen" / "rewards.jsonl"
        if sibling == out or not cache.is_file():
            continue
        if json.loads(stage.read_text(encoding="utf-8")).get("settings") == settings:
            mine.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cache, mine)
            return sibling
    return None


def read_arm(out: Path) -> dict[str, Any]:
    """An arm's GRPO stage result, with its screen's (real profile) under "screen" where it ran one."""
    res = json.loads((out / "stages" / "grpo.json").read_text(encoding="utf-8"))
    screen = out / "stages" / "screen.json"
    return {**res, "screen": json.loads(screen.read_text(encoding="utf-8"))} if screen.is_file() else res


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def arm_row(name: str, settings: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    """One table row from an arm's GRPO stage result."""
    log, curve = res.get("log", []), res.get("curve", [])
    first, last = (curve[0] if curve else {}), (curve[-1] if curve else {})
    n = last.get("n") or first.get("n") or 0
    acc0, acc1 = first.get("accuracy", math.nan), last.get("accuracy", math.nan)
    zero = [r["frac_reward_zero_std"] for r in log if "frac_reward_zero_std" in r]
    k = max(1, len(log) // 3)
    screen = res.get("screen") or {}
    return {
        "arm": name,
        "settings": settings,
        "steps": res.get("steps", 0),
        "status": res.get("stopped_early") or "ok",
        "val_start": acc0,
        "val_end": acc1,
        "val_n": n,
        "val_end_se": binomial_se(acc1, n) if math.isfinite(acc1) else math.nan,
        # the validation rows that expect a call and those that expect none, when both kinds are there
        "val_call": (first.get("call", math.nan), last.get("call", math.nan)),
        "val_no_call": (first.get("no_call", math.nan), last.get("no_call", math.nan)),
        "groups_with_signal": 1 - _mean(zero) if zero else math.nan,
        "reward_first": _mean([r["reward"] for r in log[:k] if "reward" in r]),
        "reward_last": _mean([r["reward"] for r in log[-k:] if "reward" in r]),
        "entropy_last": _mean([r["entropy"] for r in log[-k:] if "entropy" in r]),
        "clipped": _mean([r["completions/clipped_ratio"] for r in log if "completions/clipped_ratio" in r]),
        "train_cpu_s": res.get("train_cpu_s", math.nan),
        "train_wall_s": res.get("train_wall_s", math.nan),
        "rollout_s": res.get("rollout_s", math.nan),
        "update_s": res.get("update_s", math.nan),
        "peak_rss_mb": (res.get("timing") or {}).get("peak_rss_mb", math.nan),
        "screen": {k: screen[k] for k in ("in", "kept", "all_right", "all_wrong", "cpu_s", "wall_s")}
        if screen.get("enabled") else None,
    }


def _f(x: float, pct: bool = False) -> str:
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return "–"
    return f"{100 * x:.1f}" if pct else f"{x:.3f}"


def _s(x: Any, digits: int = 0) -> str:
    return f"{x:,.{digits}f}" if isinstance(x, (int, float)) and math.isfinite(x) else "–"


def table(rows: list[dict[str, Any]], steps: int) -> str:
    """The sweep as a markdown table, arms in file order; a diverged arm says why instead of ranking."""
    lines = [
        f"GRPO arms of {steps} steps from one SFT warm start; validation = greedy exact match (binary "
        "reward) on the run's validation split, ± SE over its samples.",
        "",
        "| arm | settings | steps | val before → after (%) | val: call; no call (%) | groups with signal "
        "(%) | reward first → last third | entropy (last third) | truncated (%) | CPU s | rollout / update "
        "s | peak GB | screen: prompts kept of, CPU s | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        settings = ", ".join(f"{k.removeprefix('train.')}={v}" for k, v in r["settings"].items())
        val = f"{_f(r['val_start'], True)} → {_f(r['val_end'], True)} ± {_f(r['val_end_se'], True)}"
        nan2 = (math.nan, math.nan)
        parts = "; ".join(f"{_f(a, True)} → {_f(b, True)}"
                          for a, b in (r.get("val_call", nan2), r.get("val_no_call", nan2)))
        sc = r.get("screen")
        screen = f"{sc['kept']} of {sc['in']}, {sc['cpu_s']:.0f}" if sc else "–"
        lines.append(
            f"| {r['arm']} | {settings} | {r['steps']} | {val} | {parts} | "
            f"{_f(r['groups_with_signal'], True)} | "
            f"{_f(r['reward_first'])} → {_f(r['reward_last'])} | {_f(r['entropy_last'])} | "
            f"{_f(r['clipped'], True)} | {r['train_cpu_s']:.0f} | {_s(r.get('rollout_s'))} / "
            f"{_s(r.get('update_s'))} | {_s((r.get('peak_rss_mb') or math.nan) / 1024, 1)} | {screen} | "
            f"{r['status']} |"
        )
    return "\n".join(lines) + "\n"


def cpu_curve(res: dict[str, Any]) -> list[tuple[float, float, float]]:
    """(training CPU s, training wall s, validation) per validation point; a point's CPU time is that of
    its step's log record (0 before the first step)."""
    cpu = {r["step"]: r.get("train_cpu_s", math.nan) for r in res.get("log", [])}
    return [(cpu.get(p["step"], 0.0 if p["step"] == 0 else math.nan), p.get("train_s", 0.0), p["accuracy"])
            for p in res.get("curve", [])]


def speedup(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any] | None:
    """The efficiency paper's measure: training CPU (and wall) time `other` took to first reach `base`'s
    final validation, against the time `base` took to end there ("reached" False when `other` never did,
    None when `base` ended no higher than it started: nothing to reach); None without validation points."""
    b, o = cpu_curve(base), cpu_curve(other)
    if not b or not o:
        return None
    target = b[-1][2]
    if target <= b[0][2]:  # BASE ended where it started: no time to reach it to compare
        return {"target": target, "reached": None, "base_start": b[0][2]}
    hit = next((p for p in o if p[2] >= target), None)
    if hit is None:
        return {"target": target, "reached": False}
    return {"target": target, "reached": True, "base_cpu_s": b[-1][0], "cpu_s": hit[0],
            "cpu_speedup": b[-1][0] / hit[0] if hit[0] else math.inf,
            "wall_speedup": b[-1][1] / hit[1] if hit[1] else math.inf}


def plot(results: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """Training reward per step, validation against training CPU time and against wall time, one colour
    per arm (an arm validated more often draws a curve)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(16, 4.5))
    for name, res in results.items():
        log = res.get("log", [])
        (line,) = ax.plot([r["step"] for r in log], [r.get("reward", math.nan) for r in log], marker=".",
                          label=name)
        points = cpu_curve(res)
        bx.plot([p[0] for p in points], [100 * p[2] for p in points], marker="o", color=line.get_color())
        cx.plot([p[1] for p in points], [100 * p[2] for p in points], marker="o", color=line.get_color())
    ax.set(xlabel="GRPO step", ylabel="training reward (mean over the step's rollouts)", title="reward")
    bx.set(xlabel="training CPU seconds", ylabel="validation exact match (%)", title="validation vs CPU time")
    cx.set(xlabel="training wall seconds", ylabel="validation exact match (%)",
           title="validation vs wall time")
    ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, type=Path,
                    help="quickstart run folder with a finished SFT stage")
    ap.add_argument("--out", required=True, type=Path, help="sweep folder: one run folder per arm")
    ap.add_argument("--arms", required=True, type=Path, help="sweep file (configs/sweeps/*.yaml)")
    ap.add_argument("--only", default="", help="comma-separated arm names (default: every arm)")
    ap.add_argument("--steps", type=int, default=0,
                    help="GRPO steps of every arm instead of the sweep file's `steps` (a run of another "
                    "length is another run: give it its own --out)")
    ap.add_argument("--threads", type=int, default=2,
                    help="torch threads of this process (default 2; the runs keep the source's `threads`)")
    ap.add_argument("--report", action="store_true", help="only write the table of the arms finished so far")
    ap.add_argument("--compare", default="", metavar="BASE,OTHER",
                    help="two arms: the time OTHER took to reach BASE's final validation (the efficiency "
                    "paper's speed-up), in sweep.json and under the table")
    args = ap.parse_args()
    try:
        steps, arms = read_arms(args.arms)
        if args.steps < 0:
            raise ValueError(f"--steps must be a positive number of GRPO steps, got {args.steps}")
        steps = args.steps or steps
    except (OSError, ValueError) as e:
        print(f"grpo_sweep: {e}", file=sys.stderr)
        return 2
    chosen = [a.strip() for a in args.only.split(",") if a.strip()] or list(arms)
    unknown = [a for a in chosen if a not in arms]
    if unknown:
        print(f"grpo_sweep: --only: {', '.join(unknown)} not in {args.arms} ({', '.join(arms)})",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    for name in arms:
        stage = args.out / name / "stages" / "grpo.json"
        if stage.is_file():
            results[name] = read_arm(args.out / name)
        elif name in chosen and not args.report:
            t = time.perf_counter()
            results[name] = run_arm(args.source, args.out / name, steps, arms[name], args.threads)
            print(f"[{name}] done in {time.perf_counter() - t:.0f} s", flush=True)
    rows = [arm_row(n, arms[n], r) for n, r in results.items()]
    (args.out / "sweep.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    md = table(rows, steps)
    pair = [a.strip() for a in args.compare.split(",") if a.strip()]
    if len(pair) == 2 and all(a in results for a in pair):
        sp = speedup(results[pair[0]], results[pair[1]])
        (args.out / "speedup.json").write_text(json.dumps({"base": pair[0], "other": pair[1], **(sp or {})},
                                                          indent=1), encoding="utf-8")
        if sp and sp["reached"]:
            md += (f"\n{pair[1]} reached {pair[0]}'s final validation ({100 * sp['target']:.1f}%) after "
                   f"{sp['cpu_s']:.0f} training CPU s against {sp['base_cpu_s']:.0f}: "
                   f"{sp['cpu_speedup']:.2f}x on CPU time, {sp['wall_speedup']:.2f}x on wall time.\n")
        elif sp and sp["reached"] is None:
            md += (f"\n{pair[0]} ended no higher than it started ({100 * sp['base_start']:.1f}% → "
                   f"{100 * sp['target']:.1f}%): there is no improvement whose time to reach could be "
                   "compared.\n")
        elif sp:
            md += f"\n{pair[1]} did not reach {pair[0]}'s final validation ({100 * sp['target']:.1f}%).\n"
    (args.out / "sweep.md").write_text(md, encoding="utf-8")
    if results:
        title = f"GRPO sweep from {args.source.name} ({time.strftime('%Y-%m-%d')})"
        plot(results, args.out / "sweep.png", title)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
