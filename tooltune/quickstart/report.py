"""DIR/report.json, DIR/report.md and PNG curves of a quickstart run (from whatever stages finished).

`write_report(out, config, results)` takes the stage results by stage name (`tooltune.quickstart.run`
writes them to DIR/stages/<stage>.json) and the resolved settings.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from pathlib import Path
from typing import Any

from tooltune.quickstart.stats import paired

logger = logging.getLogger(__name__)


def environment() -> dict[str, Any]:
    """Versions and hardware (the report's and the efficiency benchmark's)."""
    import torch  # deferred: heavy
    import transformers  # deferred: heavy
    import trl  # deferred: heavy

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "processor": platform.processor() or platform.machine(),
    }


def _acc(res: dict[str, Any]) -> dict[str, Any]:
    """An evaluation result without the per-example hits."""
    return {
        k: ({kk: vv for kk, vv in v.items() if kk != "hits"} if isinstance(v, dict) else v)
        for k, v in res.items()
    }


def build(config: dict[str, Any], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The report's content from the settings and the finished stages' results."""
    done = results.__contains__
    r: dict[str, Any] = {
        "seed": config["seed"],
        "config": config,
        "environment": environment(),
        "stages_finished": list(results),
        "timings": {},
    }
    for s in r["stages_finished"]:
        r["timings"][s] = results[s]["timing"]
    r["timings"]["total_wall_s"] = sum(t["wall_s"] for t in r["timings"].values())
    if done("data"):
        r["data"] = {k: v for k, v in results["data"].items() if k != "timing"}
    if done("sft"):
        sft = results["sft"]
        r["warm_start"] = {
            k: sft[k] for k in ("chosen_step", "chosen_val_accuracy", "rule", "reached_threshold")
        }
    evals = {"sft": "eval_sft", "grpo": "eval_grpo", "sft_continued": "eval_sft_continued"}
    for key, stage in evals.items():
        if done(stage):
            res = results[stage]
            r[f"{key}_accuracy"] = res["heldout"]["accuracy"]
            r[f"{key}_se"] = res["heldout"]["se"]
            r[f"{key}_eval"] = _acc(res)
    if done("eval_sft"):
        ps = results["eval_sft"]["pass"]
        r["sft_pass_at_8" if ps["k"] == 8 else f"sft_pass_at_{ps['k']}"] = ps["accuracy"]
        r["sft_pass"] = ps
    base = results["eval_sft"] if done("eval_sft") else None
    for key, stage in (("grpo", "eval_grpo"), ("sft_continued", "eval_sft_continued")):
        if base is not None and done(stage):
            r[f"{key}_vs_sft"] = paired(results[stage]["heldout"]["hits"], base["heldout"]["hits"])
            r[f"{key}_vs_sft_unseen_tools"] = paired(
                results[stage]["unseen_tools"]["hits"], base["unseen_tools"]["hits"]
            )
    if done("eval_grpo") and done("eval_sft_continued"):
        r["grpo_vs_sft_continued"] = paired(
            results["eval_grpo"]["heldout"]["hits"], results["eval_sft_continued"]["heldout"]["hits"]
        )
    if done("grpo"):
        g = results["grpo"]
        r["grpo"] = {
            k: g[k]
            for k in (
                "steps",
                "train_wall_s",
                "train_cpu_s",
                "rollout_s",
                "update_s",
                "rollouts_generated",
                "tokens_trained",
                "reward_first",
                "reward_last",
            )
        }
    if done("sft_continued"):
        sc = results["sft_continued"]
        r["sft_continued"] = {k: sc[k] for k in ("steps", "train_wall_s", "train_cpu_s", "budget_s")}
    if "grpo_vs_sft" in r:
        d = r["grpo_vs_sft"]
        r["visibly_learned"] = bool(d["diff"] >= 0.05 and d["z"] > 3)
    return r


def _md(r: dict[str, Any]) -> str:
    def pct(x: Any) -> str:
        return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "-"

    lines = [f"# tooltune quickstart report (seed {r['seed']})", ""]
    if "data" in r:
        lines += [
            f"Task: {r['data']['sizes']}; {pct(r['data']['noisy_share'])} of the SFT demonstrations are "
            "imperfect (default enum value for a paraphrase, second parallel call missing); rewards and "
            "evaluation use the exact ground truth.",
            "",
        ]
    if "warm_start" in r:
        w = r["warm_start"]
        lines += [
            f"Warm start: SFT step {w['chosen_step']} ({w['rule']}; "
            f"validation {pct(w['chosen_val_accuracy'])}).",
            "",
        ]
    lines += [
        "| checkpoint | held-out exact match | ± SE | unseen tools | vs warm start (paired) |",
        "|---|---|---|---|---|",
    ]
    for key, label in (
        ("sft", "SFT warm start"),
        ("grpo", "after GRPO"),
        ("sft_continued", "SFT continued, same time"),
    ):
        if f"{key}_accuracy" in r:
            vs = r.get(f"{key}_vs_sft")
            delta = f"{100 * vs['diff']:+.1f} pts (z {vs['z']:.1f})" if vs else "-"
            lines.append(
                f"| {label} | {pct(r[f'{key}_accuracy'])} | {pct(r[f'{key}_se'])} | "
                f"{pct(r[f'{key}_eval']['unseen_tools']['accuracy'])} | {delta} |"
            )
    if "sft_pass" in r:
        ps = r["sft_pass"]
        lines += [
            "",
            f"pass@{ps['k']} at the warm start (temperature {ps['temperature']}, "
            f"{ps['n']} held-out samples): "
            f"{pct(ps['accuracy'])} vs greedy {pct(ps['greedy_same_samples'])} on the same samples.",
        ]
    if "grpo_vs_sft_continued" in r:
        d = r["grpo_vs_sft_continued"]
        lines += [
            f"GRPO minus continued SFT: {100 * d['diff']:+.1f} pts "
            f"(paired SE {100 * d['se']:.1f}, z {d['z']:.1f})."
        ]
    cats = [k for k in ("sft", "grpo", "sft_continued") if f"{k}_eval" in r]
    if cats:
        names = sorted(r[f"{cats[0]}_eval"]["heldout"]["per_category"])
        lines += ["", "| category | n | " + " | ".join(cats) + " |", "|---|---|" + "---|" * len(cats)]
        for c in names:
            n = r[f"{cats[0]}_eval"]["heldout"]["per_category"][c]["n"]
            vals = [pct(r[f"{k}_eval"]["heldout"]["per_category"][c]["accuracy"]) for k in cats]
            lines.append(f"| {c} | {n} | " + " | ".join(vals) + " |")
    if "visibly_learned" in r:
        lines += [
            "",
            f"Visibly learned (GRPO >= +5 pts and z > 3 over the warm start): **{r['visibly_learned']}**",
        ]
    lines += [
        "",
        "Timings (wall s): "
        + ", ".join(f"{k} {v['wall_s']:.0f}" for k, v in r["timings"].items() if isinstance(v, dict)),
        f"Total: {r['timings']['total_wall_s']:.0f} s. Environment: {json.dumps(r['environment'])}",
        "",
    ]
    return "\n".join(lines)


def plots(out: Path, results: dict[str, dict[str, Any]]) -> list[str]:
    """reward, validation accuracy, zero-variance share, rollout vs update time (one PNG each)."""
    if "grpo" not in results:
        return []
    import matplotlib  # deferred: heavy

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: heavy

    g = results["grpo"]
    log = g["log"]
    names: list[str] = []

    def series(key: str) -> tuple[list, list]:
        pts = [(x["step"], x[key]) for x in log if key in x]
        return [a for a, _ in pts], [b for _, b in pts]

    figs = [
        ("reward", "training reward (binary)", [("reward", "reward")]),
        ("zero_variance", "share of zero-variance groups", [("frac_reward_zero_std", "zero-variance share")]),
        (
            "time_split",
            "seconds per step",
            [("tooltune/rollout_time", "rollout"), ("tooltune/update_time", "update")],
        ),
    ]
    for name, title, keys in figs:
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for key, label in keys:
            xs, ys = series(key)
            ax.plot(xs, ys, label=label)
        ax.set_xlabel("GRPO step")
        ax.set_title(title)
        if len(keys) > 1:
            ax.legend()
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        names.append(path.name)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    if "sft" in results:
        sft = results["sft"]["curve"]
        # markers: the warm start is often chosen at the first check, a curve of one point
        steps, accuracy = [c["step"] for c in sft], [c["val_accuracy"] for c in sft]
        ax.plot(steps, accuracy, marker="o", label="SFT (validation)")
    step0 = results["sft"]["chosen_step"] if "sft" in results else 0
    ax.plot(
        [step0 + c["step"] for c in g["curve"]],
        [c["accuracy"] for c in g["curve"]],
        marker=".",
        label="GRPO (validation)",
    )
    ax.set_xlabel("step (SFT steps, then GRPO steps)")
    ax.set_title("greedy validation exact match")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=90)
    plt.close(fig)
    return [*names, "accuracy.png"]


def write_report(
    out: str | Path, config: dict[str, Any], results: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Write out/report.json, out/report.md and the PNGs; returns the report."""
    out = Path(out)
    r = build(config, results)
    r["plots"] = plots(out, results)
    (out / "report.json").write_text(json.dumps(r, indent=1))
    (out / "report.md").write_text(_md(r) + "".join(f"\n![{x}]({x})\n" for x in r["plots"]))
    return r
