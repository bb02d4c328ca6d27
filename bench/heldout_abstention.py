"""Abstention on held-out data: whether a checkpoint still answers "no call" where no offered tool fits.

BFCL's irrelevance entries offer functions none of which serves the request; the right answer is no
call. GRPO on prompts that need a call can lose that answer while its validation exact match (mostly
call prompts: 4 of the real recipe's 32 validation answers are no call) barely moves. This measures it
on data the run never trains on, so a setting can be chosen without looking at a benchmark:

- calls: the validation samples whose answer is a call;
- no call: the validation samples whose answer is no call;
- variants: the irrelevance variant of every single-turn validation sample with a call (the called tools
  removed from the offered ones, no call expected: `tooltune.data.pipeline.irrelevance_variant`).

Each checkpoint answers greedily under the run's prompt controls and greedy budget
(`tooltune.experiment.measure.greedy`, the binary reward). The first checkpoint is the baseline of the
paired differences. Writes OUT (JSON: each checkpoint's hits and scores) and prints a table.

    python bench/heldout_abstention.py --run runs/real42 --out runs/irr42/abstention.json \\
        --checkpoint sft=runs/real42:sft \\
        --checkpoint grpo_seed0=runs/irr42/fine_grained_irrelevance:grpo
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTS = ("calls", "no call", "variants")


def held_out(val: list[Any]) -> dict[str, list[Any]]:
    """The validation samples by part (module docstring), each part in the split's order."""
    from tooltune.data.pipeline import irrelevance_variant
    from tooltune.experiment.screen import single_turn

    variants = [irrelevance_variant(s) for s in val if s.answer and single_turn(s)]
    return {"calls": [s for s in val if s.answer], "no call": [s for s in val if not s.answer],
            "variants": [v for v in variants if v is not None]}


def parse_checkpoint(spec: str) -> tuple[str, Path, str]:
    """LABEL=RUN:NAME -> (label, run folder, checkpoint name); ValueError naming the spec."""
    label, sep, rest = spec.partition("=")
    run, colon, name = rest.rpartition(":")
    if not (sep and colon and label and run and name):
        raise ValueError(f"--checkpoint {spec!r}: expected LABEL=RUN:NAME (e.g. sft=runs/real42:sft)")
    return label, Path(run), name


def same_path(a: str | Path | None, b: str | Path) -> bool:
    """Whether two spellings (relative, absolute) name one folder."""
    return a is not None and Path(a).resolve() == Path(b).resolve()


def earlier_checkpoints(out: Path, results: dict[str, Any]) -> dict[str, Any]:
    """The checkpoints an earlier run of this command scored into `out`, which must have read the same
    validation split (the same run folder and part sizes) for its hits to pair with new ones."""
    earlier = json.loads(out.read_text(encoding="utf-8"))
    if not same_path(earlier.get("run"), results["run"]) or earlier.get("n") != results["n"]:
        raise SystemExit(f"{out} holds the held-out parts of {earlier.get('run')} ({earlier.get('n')}), "
                         f"not of {results['run']} ({results['n']}): give another --out")
    return earlier["checkpoints"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="the run folder whose validation split is read")
    ap.add_argument("--checkpoint", action="append", required=True,
                    help="LABEL=RUN:NAME, a checkpoint of a run folder (sft, grpo, ...); the first is the "
                    "baseline")
    ap.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    checkpoints = [parse_checkpoint(c) for c in args.checkpoint]

    import torch

    from tooltune.experiment.config import load_config
    from tooltune.experiment.measure import backend, greedy, load
    from tooltune.experiment.pipeline import Pipeline
    from tooltune.experiment.real import real_profile
    from tooltune.experiment.stats import binomial, paired

    torch.set_num_threads(args.threads)
    source = Pipeline(args.run, load_config(args.run / "config.yaml"), profile=real_profile())
    parts = held_out(source.splits()["val"])
    results: dict[str, Any] = {"run": str(args.run), "n": {k: len(v) for k, v in parts.items()},
                               "checkpoints": {}}
    if args.out.is_file():  # a rerun keeps the checkpoints already scored
        results["checkpoints"] = earlier_checkpoints(args.out, results)
    for label, run, name in checkpoints:
        p = Pipeline(run, load_config(run / "config.yaml"), profile=real_profile())
        if label in results["checkpoints"]:
            scored = results["checkpoints"][label]["model"]
            if not same_path(scored, p.model_dir(name)):
                raise SystemExit(f"{args.out}: checkpoint {label!r} was scored on {scored}, not "
                                 f"{p.model_dir(name)}: give it another label or another --out")
            continue
        model, tok = load(p.model_dir(name))
        model.eval()
        be = backend(p, model, tok)
        hits = {part: greedy(p, be, samples, progress=f"{label} {part}")["hits"]
                for part, samples in parts.items()}
        results["checkpoints"][label] = {"model": str(p.model_dir(name)), "hits": hits}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    base = checkpoints[0][0]
    print("| checkpoint | " + " | ".join(f"{k} ({results['n'][k]})" for k in PARTS) + " |")
    print("|---|" + "---|" * len(PARTS))
    for label, *_ in checkpoints:
        hits = results["checkpoints"][label]["hits"]
        cells = []
        for part in PARTS:
            b = binomial(hits[part])
            cell = f"{100 * b['accuracy']:.1f} ± {100 * b['se']:.1f}"
            if label != base and hits[part]:
                d = paired(hits[part], results["checkpoints"][base]["hits"][part])
                cell += f" ({100 * d['diff']:+.1f}, z {d['z']:.2f})"
            cells.append(cell)
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
