"""Selection recipes: R2IF's balanced set and the efficiency paper's policy-based difficulty filter.

- R2IF trains on a balanced 5-category set: equal counts of simple, multiple, parallel,
  parallel_multiple and irrelevance samples (multi_step is not among them).
- The difficulty filter (On Effectiveness and Efficiency of Agentic Tool-calling and RL Training,
  arXiv 2606.00135) samples k rollouts per prompt from a reference policy and drops prompts the policy
  always or never solves: with a binary reward their GRPO advantages are all zero, so they cost rollout
  time and teach nothing. The success rate is p = (1/k) * sum_i R_binary(o_i, a*); the prompt is kept
  when low < p < high (defaults 0 and 1).
The model sits behind a generation backend (`tooltune.generation`), so a local HF model, an
OpenAI-compatible server or a predictions file can play the reference policy; rollouts are scored by
`tooltune.generation.score_samples`, the same exact-match verdict as the binary reward.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tooltune import config as config_mechanism
from tooltune.config import ConfigError, option
from tooltune.generation import Backend, Sampling, score_samples
from tooltune.prompts import HISTORY_MODES, TEMPLATES, PromptControls, check_history, resolve_native
from tooltune.schema import Sample

logger = logging.getLogger(__name__)

R2IF_CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")


def balanced_set(
    samples: Sequence[Sample],
    per_category: int | None = None,
    categories: Sequence[str] = R2IF_CATEGORIES,
    seed: int = 0,
) -> tuple[list[Sample], dict[str, Any]]:
    """Equal counts per category (seeded draw); the count is `per_category` capped by the rarest category.

    Returns the selection (shuffled) and a report {available, selected_per_category, shortfall}.
    """
    by_cat: dict[str, list[Sample]] = {c: [] for c in categories}
    for s in samples:
        if s.category in by_cat:
            by_cat[s.category].append(s)
    available = {c: len(v) for c, v in by_cat.items()}
    n = min(available.values()) if available else 0
    if per_category is not None:
        n = min(n, per_category)
    shortfall = {
        c: per_category - k for c, k in available.items() if per_category is not None and k < per_category
    }
    if shortfall:
        logger.warning("balanced set: too few samples in %s; using %d per category", shortfall, n)
    rng = random.Random(seed)
    chosen: list[Sample] = []
    for c in categories:
        chosen.extend(rng.sample(by_cat[c], n))
    rng.shuffle(chosen)
    return chosen, {
        "available": available,
        "selected_per_category": n,
        "shortfall": shortfall,
        "ignored": len(samples) - sum(available.values()),
    }


@dataclass
class DifficultyConfig:
    """Options of the policy-based difficulty filter (`tooltune data select --recipe difficulty` flags)."""

    k: int = option(8, "Rollouts per prompt.", min=1)
    temperature: float = option(
        1.0, "Sampling temperature of the reference policy (0 = greedy: k equal rollouts).", min=0
    )
    max_new_tokens: int = option(512, "Longest rollout, in tokens.", min=1)
    template: str = option("tool_n1", "Prompt template and output grammar (a registered template name).")
    history: str = option("messages", "Multi-turn history rendering.", HISTORY_MODES)
    low: float = option(0.0, "Drop prompts whose success rate is <= low (never solved).", min=0, max=1)
    high: float = option(1.0, "Drop prompts whose success rate is >= high (always solved).", min=0, max=1)
    batch_size: int = option(32, "Prompts per backend call (0 = all in one call).", min=0)
    seed: int = option(0, "Base seed of the rollouts (and of the balanced draw).")
    require_format: bool = option(True, "Count a rollout as solved only if its format is right.")
    cache: str | None = option(
        None, "JSONL of per-prompt rewards appended after each batch; a rerun resumes from it."
    )
    progress: bool = option(True, "Show a progress bar.")

    def validate(self) -> DifficultyConfig:
        """Check choices, ranges, low < high and the template name; raise ConfigError naming the key."""
        check_history(self.history)
        config_mechanism.check_values(self)
        if not self.low < self.high:
            raise ConfigError(f"low, high: need 0 <= low < high <= 1, got {self.low}, {self.high}")
        TEMPLATES.get(self.template)
        return self


def _read_cache(path: str | None) -> dict[str, dict[str, Any]]:
    """The cache's records by sample id, rewards parsed to floats; the last record of an id wins."""
    if not path or not os.path.isfile(path):
        return {}
    out: dict[str, dict[str, Any]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
                out[str(rec["sample_id"])] = {**rec, "rewards": [float(x) for x in rec["rewards"]]}
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash: that prompt is simply redone
    return out


def cached_cost(path: str | None, ids: Sequence[str]) -> dict[str, float]:
    """What the answers cached in `path` for `ids` cost where they were made: {"cpu_s", "wall_s", "n",
    "without_cost"} (records written before costs were recorded count in "without_cost")."""
    records = _read_cache(path)
    found = [records[i] for i in set(ids) if i in records]
    costed = [r for r in found
              if isinstance(r.get("cpu_s"), (int, float)) and isinstance(r.get("wall_s"), (int, float))]
    return {"cpu_s": sum(r["cpu_s"] for r in costed), "wall_s": sum(r["wall_s"] for r in costed),
            "n": len(found), "without_cost": len(found) - len(costed)}


def policy_rewards(
    samples: Sequence[Sample], backend: Backend, cfg: DifficultyConfig, prompt: PromptControls | None = None,
    label: str = "difficulty",
) -> dict[str, list[float]]:
    """k binary rewards per sample from `backend` (resuming from `cfg.cache`); `prompt`: the prompt
    controls training renders with (None: `cfg.template` and `cfg.history` with the other defaults);
    `label` names the progress bar and the log lines."""
    done = {sid: rec["rewards"] for sid, rec in _read_cache(cfg.cache).items()}
    todo = [s for s in samples if s.id not in done]
    if done:
        logger.info("%s: %d prompts already scored in %s", label, len(samples) - len(todo), cfg.cache)
    # seeds depend on the sample, not its position, so a resumed run draws the same rollouts
    seeds = [(cfg.seed * 1_000_003 + zlib.crc32(s.id.encode())) % 2**31 for s in todo]
    last_cpu, last_wall = time.process_time(), time.perf_counter()
    with open(cfg.cache, "a", encoding="utf-8") if cfg.cache else contextlib.nullcontext() as cache_f:

        def keep(idx: range, rewards: list[list[float]]) -> None:
            # each prompt's share of its chunk's cost, so whoever reuses the cache can account for it
            nonlocal last_cpu, last_wall
            cpu, wall = time.process_time(), time.perf_counter()
            cost = {"cpu_s": round((cpu - last_cpu) / max(1, len(idx)), 4),
                    "wall_s": round((wall - last_wall) / max(1, len(idx)), 4)}
            last_cpu, last_wall = cpu, wall
            for i, r in zip(idx, rewards):
                done[todo[i].id] = r
                if cache_f:
                    cache_f.write(json.dumps({"sample_id": todo[i].id, "rewards": r, **cost}) + "\n")
            if cache_f:
                cache_f.flush()

        # a local model answers in its own format; an endpoint's calls come back as it writes them
        base = prompt or PromptControls(cfg.template, history=cfg.history)
        template = resolve_native(getattr(backend, "tokenizer", None), base.template, "template")
        controls = base.with_template(template)
        score_samples(
            backend, todo, controls, cfg.k,
            Sampling(cfg.temperature, cfg.max_new_tokens, cfg.batch_size),
            seeds=seeds, require_format=cfg.require_format, on_chunk=keep,
            progress=label if cfg.progress else None,
        )
    return done


def difficulty_filter(
    samples: Sequence[Sample], backend: Any, cfg: DifficultyConfig, prompt: PromptControls | None = None,
    label: str = "difficulty",
) -> tuple[list[Sample], list[dict[str, Any]], dict[str, Any]]:
    """(kept, rejected records with reason and success rate, stats); every sample lands in one of the two.
    `prompt` and `label` as in `policy_rewards`."""
    rewards = policy_rewards(samples, backend, cfg, prompt, label)
    kept: list[Sample] = []
    rejected: list[dict[str, Any]] = []
    reasons: Counter = Counter()
    for s in samples:
        r = rewards.get(s.id) or []
        rate = sum(r) / len(r) if r else 0.0
        reason = (
            "no_rollouts"
            if not r
            else "always_solved"
            if rate >= cfg.high
            else "never_solved"
            if rate <= cfg.low
            else None
        )
        if reason:
            reasons[reason] += 1
            rejected.append(
                {"sample_id": s.id, "reason": reason, "success_rate": rate, "sample": s.to_dict()}
            )
        else:
            s.meta["policy_success_rate"] = rate
            kept.append(s)
    stats = {
        "in": len(samples),
        "kept": len(kept),
        "rejected": dict(reasons),
        "k": cfg.k,
        "mean_success_rate": (sum(sum(v) / len(v) for v in rewards.values() if v) / max(1, len(rewards))),
    }
    return kept, rejected, stats
