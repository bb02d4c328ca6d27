"""The `screen` stage (`screen.enabled`): the warm start screens GRPO's training prompts before GRPO.

The efficiency paper (arXiv 2606.00135, the policy-based difficulty filter) observes that a prompt whose
group of rollouts is all right or all wrong has zero advantage for every rollout (GRPO, Shao et al. 2024:
A_i = (r_i - mean(r)) / std(r)), so it costs a rollout and an update and teaches nothing. On a small model
most training prompts are such prompts. The screen measures it before paying for it:

  each training prompt gets `screen.k` answers (default: GRPO's group size) from the SFT checkpoint at
  GRPO's temperature and completion budget, under the training prompt controls, scored by the binary reward
  (format required). Prompts the warm start solves every time (all right) or never (all wrong) are set
  aside; GRPO trains on the mixed ones (DIR/screen/grpo_train.jsonl).

With `screen.irrelevance_variants` a share of the kept single-turn prompts with a call also reach GRPO as
their irrelevance variant: the called tools removed from the offered ones, no call expected (the data
pipeline's `irrelevance_variant`, BFCL's irrelevance case). GRPO on the kept prompts alone learns to call:
the fine-grained reward took BFCL's irrelevance answers from 30% to 7% in 8 steps. A variant has no
screen answers; as soon as the policy calls on it, its group is mixed and pulls toward abstaining.

Every prompt is accounted for: kept, or written with its success rate and reason to
DIR/screen/rejected.jsonl. Rewards are cached per prompt (DIR/screen/rewards.jsonl), each with the CPU
and wall time its answers took, so a killed stage resumes. A branch (`--branch-from`) screens again (the
screen reads GRPO's settings) unless its cache is seeded from a run whose recorded `settings` are equal
(bench/grpo_sweep.py does so between arms). The stage's CPU and wall time, cached answers included at
what they cost where they were made, count as GRPO's cost in the equal-compute comparison (continued SFT
gets them too). Off, the stage records that GRPO trains on every training prompt.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, fields
from typing import Any

from tooltune.config import ConfigError
from tooltune.data.pipeline import drawn_irrelevance_variant
from tooltune.data.recipes import DifficultyConfig, cached_cost, difficulty_filter
from tooltune.experiment.measure import load, run_device
from tooltune.experiment.memory import PeakMemory
from tooltune.experiment.run_folder import RunFolder
from tooltune.generation import HFBackend
from tooltune.prompts import PromptControls
from tooltune.schema import Sample, write_jsonl


def stage_screen(p: RunFolder) -> dict[str, Any]:
    """Screen the training split with the warm start; every prompt kept or rejected with its reason."""
    train = p.splits()["train"]
    if not p.cfg.screen.enabled:
        return {"enabled": False, "in": len(train), "kept": len(train), "cpu_s": 0.0, "wall_s": 0.0}
    cfg = screen_config(p)
    (p.out / "screen").mkdir(exist_ok=True)
    # answers already in the cache (a resumed stage, or a cache seeded from an arm with equal settings)
    # cost what they cost where they were made: the screen's cost counts them
    before = cached_cost(cfg.cache, [s.id for s in train])
    wall, cpu = time.perf_counter(), time.process_time()
    with PeakMemory() as memory:
        model, tok = load(p.model_dir("sft"), run_device(p.cfg))
        model.eval()
        backend = HFBackend(model=model, tokenizer=tok, batch_size=cfg.batch_size, name="screen")
        kept, rejected, stats = difficulty_filter(train, backend, cfg, prompt=p.cfg.train.data,
                                                  label="screen")
    rates = [r["success_rate"] for r in rejected] + [s.meta["policy_success_rate"] for s in kept]
    mixed = len(kept)
    kept = with_irrelevance_variants(kept, p.cfg.screen.irrelevance_variants, p.cfg.seed)
    if not kept:
        raise ConfigError(f"screen.enabled: the warm start solved all or none of the {cfg.k} answers for "
                          f"every one of the {len(train)} training prompts, so GRPO would get no prompt with "
                          "a gradient; turn the screen off or raise screen.k")
    write_jsonl(kept, str(p.screened_train()))
    with open(p.out / "screen" / "rejected.jsonl", "w", encoding="utf-8") as f:
        for r in rejected:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    successes = Counter(round(rate * cfg.k) for rate in rates)
    return {
        "enabled": True, "in": len(train), "kept": len(kept), "k": cfg.k, "temperature": cfg.temperature,
        "max_new_tokens": cfg.max_new_tokens, "all_right": stats["rejected"].get("always_solved", 0),
        "all_wrong": stats["rejected"].get("never_solved", 0), "mixed": mixed,
        "irrelevance_variants": len(kept) - mixed,
        "successes": {str(i): successes.get(i, 0) for i in range(cfg.k + 1)},
        "mean_success_rate": stats["mean_success_rate"],
        "cpu_s": time.process_time() - cpu + before["cpu_s"],
        "wall_s": time.perf_counter() - wall + before["wall_s"],
        "cached_answers": before["n"], "cached_without_cost": before["without_cost"],
        "settings": screen_settings(p), "peak_rss_mb": memory.peak_mb,
    }


def single_turn(sample: Sample) -> bool:
    """Only system and user turns before the answer: removing the called tools leaves no earlier turn
    that used them, so the sample's irrelevance variant is a well-formed prompt."""
    return all(m["role"] in ("system", "user") for m in sample.messages)


def with_irrelevance_variants(kept: list[Sample], share: float, seed: int) -> list[Sample]:
    """`screen.irrelevance_variants`: each kept single-turn prompt with a call is followed, for the drawn
    `share` of them, by its irrelevance variant (called tools removed, no call expected)."""
    out = []
    for s in kept:
        out.append(s)
        if single_turn(s):
            variant = drawn_irrelevance_variant(s, share, seed)
            if variant is not None:
                out.append(variant)
    return out


def screen_config(p: RunFolder) -> DifficultyConfig:
    """The screen's options: `screen.k` answers (0: GRPO's group size) at GRPO's temperature and
    completion budget, the training prompt controls, the run's seed, the cache in DIR/screen."""
    sc, t = p.cfg.screen, p.cfg.train
    return DifficultyConfig(
        k=sc.k or t.grpo.num_generations, temperature=t.grpo.temperature,
        max_new_tokens=t.grpo.max_completion_length, template=t.data.template, history=t.data.history,
        batch_size=sc.batch_size, seed=p.cfg.seed, require_format=True,
        cache=str(p.out / "screen" / "rewards.jsonl"),
    ).validate()


def screen_settings(p: RunFolder) -> dict[str, Any]:
    """Everything the screen's answers depend on besides the warm start: two runs branched from one source
    with equal settings draw the same answers, so one's DIR/screen/rewards.jsonl can seed the other's."""
    cfg = asdict(screen_config(p))
    for key in ("cache", "progress"):
        cfg.pop(key)
    data = p.cfg.train.data
    return {**cfg, "prompt": {f.name: getattr(data, f.name) for f in fields(PromptControls)}}


def screen_headline(res: dict[str, Any]) -> str:
    """One line summing up the screen stage."""
    if not res["enabled"]:
        return f"off: GRPO trains on all {res['in']} training prompts"
    n = res.get("irrelevance_variants")
    extra = f" + {n} irrelevance variants" if n else ""
    return (f"{res['in']} prompts at k {res['k']}: {res['all_wrong']} never solved, {res['all_right']} "
            f"always, {res['mixed']} mixed{extra} -> GRPO trains on {res['kept']}")
