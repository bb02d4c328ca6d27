"""DIR/report.json, DIR/report.md and PNG curves of a synthetic-profile run (from whatever stages finished).

`write_report(out, config, results)` takes the stage results by stage name (`tooltune.experiment.pipeline`
writes them to DIR/stages/<stage>.json) and the resolved settings.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tooltune.experiment.compute import CLOCKS, grpo_curve
from tooltune.experiment.stats import paired
from tooltune.training.report import (
    VALIDATION_KEY,
    VALIDATION_PART_KEYS,
    VALIDATION_SAMPLES_KEY,
    draw_reward,
    draw_validation,
    moving_average,
    reward_window,
)

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
        "clock": {"name": config.get("clock", "wall"), "counts": CLOCKS[config.get("clock", "wall")].counts},
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
        for split, suffix in (("heldout", ""), ("unseen_tools", "_unseen_tools")):
            r[f"grpo_vs_sft_continued{suffix}"] = paired(
                results["eval_grpo"][split]["hits"], results["eval_sft_continued"][split]["hits"]
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
                "reward_window",
            )
            if k in g
        }
    if done("sft_continued"):
        sc = results["sft_continued"]
        keys = ("steps", "clock", "train_s", "train_wall_s", "train_cpu_s", "budget_s")
        r["sft_continued"] = {k: sc[k] for k in keys if k in sc}
    if "grpo_vs_sft" in r:
        d = r["grpo_vs_sft"]
        r["visibly_learned"] = bool(d["diff"] >= 0.05 and d["z"] > 3)
    return r


def _md(r: dict[str, Any]) -> str:
    def pct(x: Any) -> str:
        return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "-"

    lines = [f"# tooltune quickstart report (seed {r['seed']})", "", *note_lines(r)]
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
        "| checkpoint | held-out exact match | ± SE | vs warm start (paired) | unseen tools ± SE "
        "| vs warm start (paired) |",
        "|---|---|---|---|---|---|",
    ]
    for key, label in (
        ("sft", "SFT warm start"),
        ("grpo", "after GRPO"),
        ("sft_continued", "SFT continued, same time"),
    ):
        if f"{key}_accuracy" in r:
            unseen = r[f"{key}_eval"]["unseen_tools"]
            lines.append(
                f"| {label} | {pct(r[f'{key}_accuracy'])} | {pct(r[f'{key}_se'])} | "
                f"{_delta(r.get(f'{key}_vs_sft'))} | {pct(unseen['accuracy'])} ± {pct(unseen['se'])} | "
                f"{_delta(r.get(f'{key}_vs_sft_unseen_tools'))} |"
            )
    if "sft_pass" in r:
        ps = r["sft_pass"]
        lines += [
            "",
            f"pass@{ps['k']} at the warm start (temperature {ps['temperature']}, "
            f"{ps['n']} held-out samples): "
            f"{pct(ps['accuracy'])} vs greedy {pct(ps['greedy_same_samples'])} on the same samples.",
        ]
    if "grpo" in r and "reward_window" in r["grpo"]:
        g = r["grpo"]
        lines += [
            f"GRPO training reward: {g['reward_first']:.2f} -> {g['reward_last']:.2f} (mean of the first / "
            f"last {g['reward_window']} of {g['steps']} steps; reward.png draws that moving average).",
        ]
    if "sft_continued" in r and "grpo" in r:
        sc, g, c = r["sft_continued"], r["grpo"], r["clock"]
        lines += [
            f"Equal compute: continued SFT got GRPO's training time on the {c['name']} clock "
            f"({c['counts']}): {sc.get('budget_s', 0):.0f} s, {sc['steps']} SFT steps. GRPO trained "
            f"{g.get('train_cpu_s', 0):.0f} s of CPU time in {g.get('train_wall_s', 0):.0f} s of wall time "
            "(held-out evaluations excluded).",
        ]
    if "grpo_vs_sft_continued" in r:
        d, u = r["grpo_vs_sft_continued"], r.get("grpo_vs_sft_continued_unseen_tools")
        lines += [
            f"GRPO minus continued SFT: held-out {_delta(d)}"
            + (f"; unseen tools {_delta(u)}." if u else ".")
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


def _delta(d: dict[str, float] | None) -> str:
    """A paired difference in points with its standard error and z, or "-"."""
    if not d:
        return "-"
    return f"{100 * d['diff']:+.1f} pts ± {100 * d['se']:.1f} (z {d['z']:.1f})"


def _validation_samples(config: dict[str, Any], results: dict[str, dict[str, Any]]) -> tuple[int, int]:
    """(SFT checks, GRPO curve): how many validation samples each evaluates."""
    n_val = results["data"]["sizes"]["val"] if "data" in results else config["task"]["n_val"]
    t = config["train"]
    grpo = min(n_val, t["data"]["max_val_samples"] or n_val, t["diagnostics"]["eval_samples"])
    return min(n_val, config["warm_start"]["eval_samples"]), grpo


def accuracy_figure(plt: Any, config: dict[str, Any], results: dict[str, dict[str, Any]]) -> Any:
    """Validation exact match through SFT (left: the warm-start checks, by step) and from the warm start
    on (right: GRPO and SFT continued for the same training time, against training time on the run's
    clock), in percent on 0-100 axes, ± 1 binomial standard error."""
    n_sft, n_grpo = _validation_samples(config, results)
    panels = [k for k in ("sft", "grpo") if k in results]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), sharey=True, squeeze=False)
    for ax, stage in zip(axes[0], panels):
        if stage == "sft":
            sft = results["sft"]
            draw_validation(ax, [{"step": c["step"], VALIDATION_KEY: c["val_accuracy"],
                                  VALIDATION_SAMPLES_KEY: n_sft} for c in sft["curve"]], "SFT checks")
            ax.axvline(sft["chosen_step"], color="grey", linestyle="--", linewidth=1,
                       label=f"warm start (step {sft['chosen_step']})")
            ax.set_xlim(0, 1.08 * max([c["step"] for c in sft["curve"]] + [sft["chosen_step"], 1]))
            ax.set_xlabel("SFT step")
            ax.set_title("SFT warm start", fontsize=10)
        else:
            clock = config.get("clock", "wall")
            draw_validation(ax, [{"step": c["t"], VALIDATION_KEY: c["accuracy"],
                                  VALIDATION_SAMPLES_KEY: c.get("n", n_grpo)}
                                 | {key: c[part] for part, key in VALIDATION_PART_KEYS.items() if part in c}
                                 for c in grpo_curve(results["grpo"], clock)], "GRPO")
            if "sft_continued" in results:
                draw_validation(ax, [{"step": c["t"], VALIDATION_KEY: c["accuracy"],
                                      VALIDATION_SAMPLES_KEY: n_grpo}
                                     for c in results["sft_continued"].get("curve", [])], "SFT continued")
            ax.set_xlabel(f"training {clock} time from the warm start (s)")
            ax.set_title("GRPO vs SFT continued, equal compute", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel("greedy exact match (%)")
    fig.suptitle("Validation exact match (greedy), ± 1 standard error", fontsize=10)
    fig.tight_layout()
    return fig


def plots(out: Path, config: dict[str, Any], results: dict[str, dict[str, Any]]) -> list[str]:
    """reward.png (raw and moving average), accuracy.png (validation through SFT and GRPO),
    zero_variance.png, time_split.png (rollout vs update seconds per step); each only with its data."""
    if "sft" not in results:
        return []
    import matplotlib  # deferred: heavy

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: heavy

    names: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        names.append(name)

    if "grpo" in results:
        log = results["grpo"]["log"]
        grpo = config["train"]["grpo"]
        rollouts = grpo["num_generations"] * grpo["prompts_per_step"]
        fig, ax = plt.subplots(figsize=(5.6, 3.4))
        draw_reward(ax, log)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(f"mean reward of the step's\n{rollouts} rollouts (binary)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        save(fig, "reward.png")
    save(accuracy_figure(plt, config, results), "accuracy.png")
    if "grpo" not in results:
        return names
    log = results["grpo"]["log"]
    figs = [
        ("zero_variance.png", "Prompts whose rollouts all got the same reward", "share of the step's prompts",
         [("frac_reward_zero_std", "zero-variance share")], (0, 1)),
        ("time_split.png", "Wall time per GRPO step", "seconds",
         [("tooltune/rollout_time", "rollout (generation + scoring)"),
          ("tooltune/update_time", "policy update")], None),
    ]
    for name, title, ylabel, keys, ylim in figs:
        fig, ax = plt.subplots(figsize=(5.6, 3.4))
        for key, label in keys:
            pts = [(x["step"], x[key]) for x in log if key in x]
            xs, ys = [a for a, _ in pts], [b for _, b in pts]
            if len(keys) == 1 and ys:  # a noisy share: the raw curve faint, its moving average drawn
                w = reward_window(len(ys))
                ax.plot(xs, ys, color="C0", alpha=0.35, linewidth=1, label=f"{label}, per step")
                ax.plot(xs[w - 1 :], moving_average(ys, w), color="C0", linewidth=2,
                        label=f"{label}, mean of the last {w} steps")
            else:
                ax.plot(xs, ys, label=label)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(ylabel)
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        save(fig, name)
    return names


def note_lines(r: dict[str, Any]) -> list[str]:
    """A report's `notes` as Markdown paragraphs (each line, then a blank one)."""
    return [x for note in r.get("notes", []) for x in (note, "")]


def write_report(
    out: str | Path, config: dict[str, Any], results: dict[str, dict[str, Any]], notes: Sequence[str] = ()
) -> dict[str, Any]:
    """Write out/report.json, out/report.md and the PNGs; returns the report. `notes`: lines stated under
    the title (e.g. what a branched run shares with its source)."""
    out = Path(out)
    r = {**build(config, results), "notes": list(notes)}
    r["plots"] = plots(out, config, results)
    (out / "report.json").write_text(json.dumps(r, indent=1))
    (out / "report.md").write_text(_md(r) + "".join(f"\n![{x}]({x})\n" for x in r["plots"]))
    return r
