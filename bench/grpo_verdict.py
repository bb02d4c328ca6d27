"""The verdict on GRPO: its checkpoints against the SFT warm start and against SFT continued for the same
CPU time, on the same benchmark entries, with paired differences; and whether the goal is met.

Each checkpoint is an evaluation result (`bench/eval_checkpoint.py`'s RUN/partial_eval_NAME.json, or an
evaluation stage's result), named LABEL=FILE. Every checkpoint is compared with `--baseline` (the warm
start) and each `--grpo` checkpoint also with `--rival` (continued SFT), through the real report's
`compare_checkpoints` (official verdicts, paired over the entries both scored; the unseen-tools split by
its per-sample hits). The goal: every GRPO checkpoint beats the baseline by at least `--goal` on each
`--goal-benchmarks` headline with z >= `--z`, and is not below the rival there.

    python bench/grpo_verdict.py --config runs/real42/config.yaml \\
        --checkpoint sft=runs/real42/partial_eval_sft.json \\
        --checkpoint grpo_seed0=runs/screen42/screened_lr_1e-5/partial_eval_grpo.json \\
        --checkpoint grpo_seed1=runs/screen42/screened_lr_1e-5_seed1/partial_eval_grpo.json \\
        --checkpoint sft_continued=runs/screen42/screened_lr_1e-5/partial_eval_sft_continued.json \\
        --grpo grpo_seed0,grpo_seed1 --out bench/results/grpo_verdict.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tooltune.experiment.real_report import compare_checkpoints  # noqa: E402 (after the path insert)


def read_checkpoints(specs: list[str]) -> dict[str, dict[str, Any]]:
    """LABEL=FILE specs -> label -> evaluation result; a clear error naming the spec that is wrong."""
    out: dict[str, dict[str, Any]] = {}
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            raise ValueError(f"--checkpoint {spec!r}: expected LABEL=FILE")
        try:
            res = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"--checkpoint {label}: {path} does not exist") from None
        res = res.get("result", res)  # an evaluation stage's file holds the result under "result"
        if not isinstance(res.get("benchmarks"), dict) or "unseen_tools" not in res:
            raise ValueError(f"--checkpoint {label}: {path} is not an evaluation result "
                             "(no benchmarks / unseen_tools)")
        out[label] = res
    return out


def verdict(config: dict[str, Any], ckpts: dict[str, dict[str, Any]], baseline: str, grpo: list[str],
            rival: str | None, goal: float, z_min: float, goal_benchmarks: list[str]) -> dict[str, Any]:
    """Scores of every checkpoint, paired differences (each vs `baseline`; each of `grpo` vs `rival`) and
    the goal's checks, one per GRPO checkpoint and goal benchmark."""
    for label in [baseline, *grpo, *([rival] if rival else [])]:
        if label not in ckpts:
            raise ValueError(f"{label!r} is not a --checkpoint label ({', '.join(ckpts)})")
    scores = {label: {**{b: {"key": r["headline_key"], "value": r["headline"], "se": r["headline_se"]}
                         for b, r in res["benchmarks"].items()},
                      "unseen_tools": {"key": "accuracy", "value": res["unseen_tools"]["accuracy"],
                                       "se": res["unseen_tools"]["se"]}}
              for label, res in ckpts.items()}
    pairs = [(b, baseline) for b in ckpts if b != baseline]
    pairs += [(g, rival) for g in grpo if rival and g != rival]
    paired = [{"b": b, "a": a, **row} for b, a in pairs
              for row in compare_checkpoints(config, ckpts[b], ckpts[a])]

    def delta(b: str, a: str, bench: str) -> dict[str, Any] | None:
        key = _headline(scores, b, bench)
        row = next((r for r in paired if (r["b"], r["a"], r["benchmark"]) == (b, a, bench)), None)
        return None if row is None or key not in row["scores"] else row["scores"][key]

    checks = []
    for g in grpo:
        for bench in goal_benchmarks:
            vs_base, vs_rival = delta(g, baseline, bench), delta(g, rival, bench) if rival else None
            met = (vs_base is not None and vs_base["delta"] >= goal and (vs_base.get("z") or 0) >= z_min
                   and (rival is None or (vs_rival is not None and vs_rival["delta"] >= 0)))
            checks.append({"grpo": g, "benchmark": bench, "vs_baseline": vs_base, "vs_rival": vs_rival,
                           "met": met})
    return {"baseline": baseline, "grpo": grpo, "rival": rival, "goal": goal, "z": z_min,
            "scores": scores, "paired": paired, "checks": checks,
            "goal_met": bool(checks) and all(c["met"] for c in checks)}


def _headline(scores: dict[str, Any], label: str, bench: str) -> str | None:
    """The score key of checkpoint `label`'s headline on `bench` (None where it has no score there)."""
    return scores[label].get(bench, {}).get("key")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _diff(d: dict[str, Any] | None) -> str:
    if d is None:
        return "–"
    z = "–" if d.get("z") is None else f"{d['z']:+.2f}"
    return f"{100 * d['delta']:+.1f} ± {_pct(d.get('se'))} (z {z})"


def markdown(v: dict[str, Any]) -> str:
    """The scores table, the paired differences (headlines, then the scores inside them) and the goal's
    checks."""
    benches = list(dict.fromkeys(b for s in v["scores"].values() for b in s))
    lines = ["| checkpoint | " + " | ".join(benches) + " |", "|---|" + "---|" * len(benches)]
    for label, s in v["scores"].items():
        cells = [f"{_pct(s[b]['value'])} ± {_pct(s[b]['se'])}" if b in s else "–" for b in benches]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "| B − A (points, paired) | " + " | ".join(benches) + " |", "|---|" + "---|" * len(benches)]
    for b, a in dict.fromkeys((r["b"], r["a"]) for r in v["paired"]):
        cells = []
        for bench in benches:
            row = next((r for r in v["paired"] if (r["b"], r["a"], r["benchmark"]) == (b, a, bench)), None)
            key = _headline(v["scores"], b, bench)
            cells.append(_diff(row["scores"].get(key)) if row else "–")
        lines.append(f"| {b} − {a} | " + " | ".join(cells) + " |")
    lines += ["", *_inside(v)]
    lines += ["", f"Goal: each GRPO checkpoint − {v['baseline']} ≥ {100 * v['goal']:+.0f} points with z ≥ "
              f"{v['z']:g}" + (f", and ≥ {v['rival']}" if v["rival"] else "") + ":"]
    for c in v["checks"]:
        lines.append(f"- {c['grpo']} on {c['benchmark']}: {_diff(c['vs_baseline'])} vs {v['baseline']}"
                     + (f", {_diff(c['vs_rival'])} vs {v['rival']}" if v["rival"] else "")
                     + f": {'met' if c['met'] else 'not met'}")
    lines.append(f"Goal {'met' if v['goal_met'] else 'not met'}.")
    return "\n".join(lines) + "\n"


def _inside(v: dict[str, Any]) -> list[str]:
    """The paired sub-scores beside each headline (BFCL's non-live, live and hallucination, API-Bank's
    levels): a gain in the headline can hide a loss inside it, such as answers that stop abstaining."""
    lines = ["| B − A, inside the headline (paired) | score | A | B | B − A |", "|---|---|---|---|---|"]
    for r in v["paired"]:
        headline = _headline(v["scores"], r["b"], r["benchmark"])
        for key, d in r["scores"].items():
            if key != headline and "a" in d and "b" in d:
                lines.append(f"| {r['b']} − {r['a']} | {r['benchmark']}: {key} | {_pct(d['a'])} | "
                             f"{_pct(d['b'])} | {_diff(d)} |")
    return lines if len(lines) > 2 else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, required=True,
                    help="the run's config.yaml (its benchmarks.headline keys name what is compared)")
    ap.add_argument("--checkpoint", action="append", default=[], required=True, metavar="LABEL=FILE",
                    help="an evaluation result (bench/eval_checkpoint.py's output); repeat")
    ap.add_argument("--baseline", default="sft", help="the label every checkpoint is compared with")
    ap.add_argument("--grpo", default="", help="comma-separated labels of the GRPO checkpoints")
    ap.add_argument("--rival", default="sft_continued",
                    help="the label each GRPO checkpoint must not fall below ('' = none)")
    ap.add_argument("--goal", type=float, default=0.05, help="least GRPO − baseline (a fraction)")
    ap.add_argument("--z", type=float, default=2.0, help="least z of GRPO − baseline")
    ap.add_argument("--goal-benchmarks", default="bfcl,apibank", help="benchmarks the goal is judged on")
    ap.add_argument("--out", type=Path, help="write the verdict here as JSON (and .md beside it)")
    args = ap.parse_args()

    import yaml

    config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    try:
        ckpts = read_checkpoints(args.checkpoint)
        grpo = [g.strip() for g in args.grpo.split(",") if g.strip()]
        v = verdict(config, ckpts, args.baseline, grpo, args.rival or None, args.goal, args.z,
                    [b.strip() for b in args.goal_benchmarks.split(",") if b.strip()])
    except ValueError as e:
        raise SystemExit(str(e)) from None
    text = markdown(v)
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        v["inputs"] = dict(spec.partition("=")[::2] for spec in args.checkpoint)
        args.out.write_text(json.dumps(v, indent=1), encoding="utf-8")
        args.out.with_suffix(".md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
