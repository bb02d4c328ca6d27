"""ACE, R2IF's average chain-of-thought effectiveness (the R2IF paper's metric, not the ACEBench
benchmark), over a benchmark's single-turn entries.

    R_cer = v(R | Q, T) − v_base(Q, T)        ACE = mean of R_cer over the entries     (R2IF)

A student model continues K times from the evaluated model's reasoning R (the template's reasoning
block closed, the call block opened); v is the share of continuations whose calls are right, v_base the
student's own success rate on the entry (`tooltune.rewards.cer.CERReward`, which this module runs).
ACE > 0 says the model's reasoning helps the student more than the student's own does.

The entries are a benchmark's single-turn entries whose correct answer is a list of calls, rendered
exactly as the benchmark's evaluation renders them under the same `Controls` (`runner.prepare`):
- BFCL: the single-turn AST categories (ground truth: the first acceptable value of each argument,
  `bfcl.ground_truth_calls`) and irrelevance, live_irrelevance (no call); live_relevance (any call
  passes) and the multi-turn categories have no such answer and are left out;
- API-Bank: every level (the expected request);
- ACEBench: the normal categories (the sample's answer; of several acceptable answers the first) and
  special_irrelevant (no call); special_incomplete and special_error_param (the answer is a sentence)
  and the agent categories are left out.
As in R_cer, continuations are judged by exact call match (`tooltune.matching`), not by the benchmark's
checker. The template's grammar needs a reasoning block (tool_n1, r2if).

The evaluated model's completions come from any backend, one per seed: a `ReplayBackend` of an
evaluation's `completions_seed<S>.jsonl` reuses that run's completions; a model backend generates them
here with `Sampling`. The student is any backend, a `BackendConfig` or a mapping of its fields.

Output folder, like `runner.evaluate`'s: `ace.jsonl` (one line per seed and entry: {"id", "category",
"seed", "r_cer", "v", "v_base"}, appended as produced; `resume=True` skips finished entries),
`completions_seed<S>.jsonl` (the completions scored), `v_base.sqlite` (the student baselines per entry
and student, committed per batch, so a resumed run asks none twice), `summary.json` (per seed: ace,
its standard error, n, mean v and v_base, per category; mean ± std over seeds; the entries left out)
and `manifest.json` (`manifest.build_manifest`, with the student and the ACE settings under `sampling`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from tooltune.config import ConfigError, check_values, option
from tooltune.evaluation.benchmark import BENCHMARKS, ProvidesAceGold, require
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.manifest import build_manifest
from tooltune.evaluation.runner import prepare, with_model_template
from tooltune.evaluation.uncertainty import aggregate_seeds
from tooltune.evaluation.verdict_log import VerdictLog
from tooltune.generation import Backend, GenerationRequest, Sampling, generate_in_chunks
from tooltune.prompts import CHAT_TOOLS_COLUMN
from tooltune.rewards.cer import CERReward
from tooltune.schema import ToolCall

logger = logging.getLogger(__name__)

ACE_FILE = "ace.jsonl"
V_BASE_FILE = "v_base.sqlite"

@dataclass
class AceOptions:
    """The CER settings of an ACE run (`tooltune eval ace` flags of the same names)."""

    k: int = option(5, "Student continuations per entry and reasoning (R2IF: 5).", min=1)
    student_temperature: float = option(0.4, "Sampling temperature of the student (R2IF: 0.4).", min=0)
    student_max_new_tokens: int = option(256, "Longest student continuation, in tokens.", min=1)
    base_mode: str = option(
        "free",
        "How v_base is measured: free (the student answers the entry on its own, reasoning included) or "
        "no_reasoning (it continues from an empty reasoning block).",
        ("free", "no_reasoning"),
    )
    student_seed: int = option(0, "Seed of the student's sampling.")
    cer_batch_size: int = option(64, "Entries per student call (their K continuations each).", min=1)

    def validate(self) -> AceOptions:
        check_values(self)
        return self


@dataclass
class AceItem:
    """One entry: its prompt as the evaluation renders it (with its chat-template tools under ``native``),
    and its correct calls."""

    id: str
    category: str
    messages: list[dict[str, Any]]
    gold: list[ToolCall]
    tools: list[dict[str, Any]] | None = None

    @property
    def key(self) -> str:
        """The v_base cache key: the entry id and a hash of its prompt (other controls, other prompt)."""
        blob = json.dumps(self.messages, sort_keys=True, ensure_ascii=False)
        return f"{self.id}@{hashlib.sha1(blob.encode('utf-8')).hexdigest()[:16]}"


@dataclass
class AceSet:
    items: list[AceItem]
    categories: list[str]
    data_files: list[str]
    left_out: dict[str, str]


def ace_set(benchmark: str, categories: Sequence[str] | str | None, controls: Controls,
            data_dir: str | os.PathLike | None = None) -> AceSet:
    """The entries of `benchmark` ACE runs on (`ProvidesAceGold.ace_gold`), with their prompts and correct
    calls; `MissingCapability` naming a benchmark without them."""
    bench = BENCHMARKS[benchmark]
    gold = require(bench, ProvidesAceGold, "ACE gold (single-turn entries with one correct call list)")
    found = gold.ace_gold(categories, controls, bench.data_dir(data_dir))
    if not found.kept:
        return AceSet([], [], [], found.left_out)
    prep = prepare(benchmark, found.kept, controls, data_dir)
    items = [AceItem(t.id, t.category, t.messages, found.gold[t.id], t.tools)
             for t in prep.tasks if t.id in found.gold]
    return AceSet(items, sorted({i.category for i in items}), prep.data_files, found.left_out)


def ace_statistics(values: Sequence[float]) -> dict[str, float]:
    """ACE (the mean), its standard error and n: the statistics of `rewards.cer.average_cot_effectiveness`."""
    n = len(values)
    if not n:
        return {"ace": 0.0, "stderr": 0.0, "n": 0}
    mean = sum(values) / n
    var = sum((x - mean) ** 2 for x in values) / (n - 1) if n > 1 else 0.0
    return {"ace": mean, "stderr": math.sqrt(var / n), "n": n}


def ace_scores(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One seed's summary from its `ace.jsonl` records: ACE, stderr, n, mean v and v_base, per category."""
    scored = [r for r in records if r.get("r_cer") is not None]
    out: dict[str, Any] = ace_statistics([float(r["r_cer"]) for r in scored])
    out["v"] = sum(float(r["v"]) for r in scored) / len(scored) if scored else 0.0
    out["v_base"] = sum(float(r["v_base"]) for r in scored) / len(scored) if scored else 0.0
    cats: dict[str, list[float]] = {}
    for r in scored:
        cats.setdefault(r["category"], []).append(float(r["r_cer"]))
    out["categories"] = {c: ace_statistics(v) for c, v in sorted(cats.items())}
    return out


def make_cer(
    student: Any, controls: Controls, options: AceOptions, cache_path: str | os.PathLike
) -> CERReward:
    """The R_cer reward ACE averages, for `controls`' template and parser mode."""
    if controls.grammar.continuation is None:
        raise ConfigError(
            f"template: ACE needs a template whose grammar has a reasoning block (tool_n1, r2if), "
            f"got {controls.template!r}"
        )
    return CERReward(
        student, template=controls.prompt_template, format_mode=controls.mode, k=options.k,
        temperature=options.student_temperature, max_new_tokens=options.student_max_new_tokens,
        cache_path=str(cache_path), base_mode=options.base_mode, seed=options.student_seed,
    )


def _completions(items: Sequence[AceItem], backend: Backend, seed: int, sampling: Sampling,
                 partial: bool) -> list[tuple[AceItem, str]]:
    """(item, completion) for the items `backend` answers; a replayed file's missing entries are empty
    completions (R_cer = −v_base), or left out with `partial`."""
    has = getattr(backend, "has", None)
    out: list[tuple[AceItem, str]] = []
    todo = list(items)
    if has is not None:
        missing = sum(not has(i.id) for i in todo)
        if missing:
            logger.warning("%s: %d of %d entries have no prediction: %s", backend.name, missing, len(todo),
                           "left out (partial)" if partial else "scored as empty completions")
        out += [(i, "") for i in todo if not has(i.id) and not partial]
        todo = [i for i in todo if has(i.id)]
    reqs = [GenerationRequest(i.messages, temperature=sampling.temperature,
                              max_new_tokens=sampling.max_new_tokens, seed=seed, id=i.id, tools=i.tools)
            for i in todo]
    for idx, outputs in generate_in_chunks(backend, reqs, sampling.batch_size):
        out += [(todo[j], texts[0] if texts else "") for j, texts in zip(idx, outputs)]
    return out


def evaluate_ace(
    benchmark: str,
    backends: Backend | Sequence[tuple[int, Backend]],
    student: Any,
    out_dir: str | os.PathLike,
    controls: Controls | None = None,
    categories: Sequence[str] | str | None = None,
    options: AceOptions | None = None,
    sampling: Sampling | None = None,
    data_dir: str | os.PathLike | None = None,
    resume: bool = False,
    partial: bool = False,
    model: str | None = None,
    cache_path: str | os.PathLike | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """ACE of the model behind `backends` on `benchmark`, with `student`; writes the folder described in
    the module doc and returns the summary.

    `backends`: (seed, backend) pairs, or one backend for seed 0 (a replayed predictions file holds one
    seed). `student`: a Backend, a `BackendConfig` or a mapping of its fields. `controls` must be those
    the completions were made under (`Controls(template="r2if")` for an R2IF model). `cache_path`: the
    v_base cache (default `out_dir/v_base.sqlite`; share one across runs with the same student)."""
    controls, sampling = BENCHMARKS[benchmark].controls(controls), sampling or Sampling()
    options = (options or AceOptions()).validate()
    if isinstance(backends, Backend):
        backends = [(0, backends)]
    controls = with_model_template(backends, controls)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cer = make_cer(student, controls, options, cache_path or out / V_BASE_FILE)
    found = ace_set(benchmark, categories, controls, data_dir)
    seeds = [s for s, _ in backends]
    names = ", ".join(b.name for _, b in backends)
    settings = asdict(sampling) | {"partial": partial, "ace": asdict(options), "student": cer.student_name}
    manifest = build_manifest(f"{benchmark}:ace", found.categories, controls, seeds, model, names,
                              found.data_files, settings)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    with VerdictLog(out / ACE_FILE, resume=resume) as log:
        total = len(found.items) * len(backends) - len(log.done)
        bar = tqdm(total=total, desc=f"{benchmark} ace", unit="entry", disable=not show_progress)
        try:
            for seed, backend in backends:
                todo = [i for i in found.items if (seed, i.id) not in log.done]
                pairs = _completions(todo, backend, seed, sampling, partial)
                path = out / f"completions_seed{seed}.jsonl"
                with open(path, "a" if resume else "w", encoding="utf-8") as f:
                    f.writelines(json.dumps({"id": i.id, "result": t}, ensure_ascii=False) + "\n"
                                 for i, t in pairs)
                for start in range(0, len(pairs), options.cer_batch_size):
                    chunk = pairs[start : start + options.cer_batch_size]
                    values = cer.batch([t for _, t in chunk], [i.gold for i, _ in chunk],
                                       prompt=[i.messages for i, _ in chunk],
                                       sample_id=[i.key for i, _ in chunk],
                                       **{CHAT_TOOLS_COLUMN: [i.tools for i, _ in chunk]})
                    for (item, _), r in zip(chunk, values):
                        v_base = cer.cache.get(item.key, cer.student_name) or 0.0
                        log.add({"id": item.id, "category": item.category, "seed": seed, "r_cer": r,
                                 "v": r + v_base, "v_base": v_base})
                    bar.update(len(chunk))
        finally:
            bar.close()
        records = list(log.records)
    per_seed = {s: ace_scores([r for r in records if r.get("seed", 0) == s]) for s in seeds}
    stats = aggregate_seeds(per_seed)
    summary = {"benchmark": benchmark, "metric": "ace", "student": cer.student_name, "seeds": seeds,
               "n_entries": len(found.items), "scores": {k: v["mean"] for k, v in stats.items()},
               "mean_std": stats, "per_seed": {str(s): v for s, v in per_seed.items()},
               "left_out": found.left_out}
    no_prediction = {str(s): sum(not has(i.id) for i in found.items) for s, b in backends
                     if (has := getattr(b, "has", None)) is not None}
    if no_prediction:  # replayed predictions: entries without one (left out with `partial`)
        summary["no_prediction"] = no_prediction
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
