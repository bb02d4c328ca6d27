"""The real profile (`profile: real`): a pretrained model folder, real training data, official benchmarks.

The same training stages as the synthetic profile (SFT warm start -> GRPO with the binary reward ->
continued SFT for GRPO's training time, `tooltune.experiment.stages`), with four stages of its own:

  data      `tooltune.data.pipeline.prepare` on `real_data.source` (ToolRL by default; training samples
            copying a user turn of BFCL, API-Bank or ACEBench are dropped: `real_data.decontaminate`),
            split by tool domain (`tooltune.data.domain_split`): train, val (training domains, kept out
            of training) and unseen_tools (domains no training sample offers)
  model     the model folder `model`, loaded once to count it (the load phase of the time table)
  screen    with `screen.enabled`, the warm start's k answers per training prompt decide which prompts
            GRPO trains on: the mixed ones (`tooltune.experiment.screen`)
  eval_*    every checkpoint (the untrained model as eval_base, then sft, grpo, sft_continued) on the
            official benchmarks of `benchmarks.suites` through the evaluation runner, each on its fixed
            stratified subset (`benchmarks.subset`, seed `benchmarks.subset_seed`), greedy, plus greedy
            exact match on the unseen-tools split

Each benchmark run is a `tooltune eval` run folder under DIR/evals/<checkpoint>/<benchmark>/ (verdicts,
summary with standard errors, manifest, report), resumed inside the stage after a kill.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from tooltune.config import ConfigError
from tooltune.data.domain_split import split_by_domain, tool_domains
from tooltune.data.pipeline import PrepareConfig, prepare
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.options import EvalOptions
from tooltune.evaluation.runner import evaluate
from tooltune.experiment import stages
from tooltune.experiment.measure import greedy, load, run_device
from tooltune.experiment.memory import PeakMemory
from tooltune.experiment.real_report import write_real_report
from tooltune.experiment.run_folder import Profile, RunFolder
from tooltune.experiment.screen import screen_headline, stage_screen
from tooltune.generation import HFBackend, Sampling
from tooltune.schema import read_jsonl, write_jsonl

CHECKPOINTS = ("base", "sft", "grpo", "sft_continued")
"""The evaluated checkpoints, in pipeline order (base = the model folder as given)."""

REAL_STAGES = ("data", "model", "eval_base", "sft", "eval_sft", "screen", "grpo", "eval_grpo",
               "sft_continued", "eval_sft_continued")

REAL_DESCRIPTIONS = {
    **stages.DESCRIPTIONS,
    "data": "preparing the real training data and splitting it by tool domain",
    "model": "loading the model folder",
    "eval_base": "evaluating the untrained model on the benchmark subsets",
    "sft": "SFT warm start on the real training data",
    "eval_sft": "evaluating the warm start on the benchmark subsets",
    "screen": "screening GRPO's training prompts by the warm start's k answers (screen.enabled)",
}

REAL_SPLITS = ("train", "val", "unseen_tools")


def real_headline(name: str, res: dict[str, Any]) -> str:
    """One line summing up a finished stage of the real profile."""
    if name == "data":
        return ", ".join(f"{k} {v}" for k, v in res["sizes"].items()) + f"; {res['domains']} tool domains"
    if name == "model":
        return f"{res['parameters']:,} parameters, loaded in {res['load_s']:.0f} s"
    if name == "screen":
        return screen_headline(res)
    if name.startswith("eval_"):
        parts = [f"{b} {r['headline_key']} {r['headline']:.1%} ± {r['headline_se']:.1%}"
                 for b, r in res["benchmarks"].items() if r.get("headline") is not None]
        unseen = res["unseen_tools"]
        return "; ".join(parts + [f"unseen tools {unseen['accuracy']:.1%} ± {unseen['se']:.1%}"])
    return stages.headline(name, res)


def stage_real_data(p: RunFolder) -> dict[str, Any]:
    """Prepare the source, split by tool domain; refuse a training split below `real_data.min_train`."""
    rd = p.cfg.real_data
    prepared = p.out / "data" / "prepared"
    config = PrepareConfig(sources=[(rd.source, rd.input)], out=str(prepared), val_fraction=0.0,
                           seed=p.cfg.seed, progress=False, limit=rd.limit or None,
                           no_call_samples=rd.no_call_samples, decontaminate=rd.decontaminate,
                           eval_data=rd.eval_data or None)
    stats = prepare(config)
    samples = read_jsonl(str(prepared / "train.jsonl"))
    seen, unseen = split_by_domain(samples, rd.unseen_fraction, p.cfg.seed)
    order = list(range(len(seen)))
    random.Random(p.cfg.seed).shuffle(order)
    val_ids = set(order[: rd.val_samples])
    splits = {"train": [s for i, s in enumerate(seen) if i not in val_ids],
              "val": [s for i, s in enumerate(seen) if i in val_ids], "unseen_tools": unseen}
    if len(splits["train"]) < rd.min_train:
        raise ConfigError(f"real_data.min_train: {rd.source} gave {len(splits['train'])} training samples "
                          f"after the splits ({len(samples)} prepared), fewer than {rd.min_train}")
    for name, rows in splits.items():
        write_jsonl(rows, str(p.out / "data" / f"{name}.jsonl"))
    p._splits = None
    written = json.loads((prepared / "stats.json").read_text(encoding="utf-8"))
    return {"sizes": {k: len(v) for k, v in splits.items()}, "prepared": len(samples),
            "domains": len(tool_domains(samples)), "decontamination": written.get("decontamination"),
            "sources": {name: st.to_dict() for name, st in stats.items()}}


def stage_real_model(p: RunFolder) -> dict[str, Any]:
    start = time.perf_counter()
    model, tok = load(p.model_dir("base"))
    return {"path": str(p.model_dir("base")), "parameters": sum(x.numel() for x in model.parameters()),
            "vocab": len(tok), "load_s": time.perf_counter() - start}


def evaluation_template(p: RunFolder) -> str:
    """The template the benchmarks are run under: `benchmarks.template`, else the training template."""
    return p.cfg.benchmarks.template or p.cfg.train.data.template


def _headline_key(listed: str, scores: dict[str, float], categories: list[str]) -> str | None:
    """The score a stage line shows: the last of the benchmark's `benchmarks.headline` keys it scored (the
    lists end with the overall score), else its one category's accuracy."""
    found = [k.strip() for k in listed.split(",") if k.strip() in scores]
    if found:
        return found[-1]
    return f"categories.{categories[0]}.accuracy" if len(categories) == 1 else None


def evaluate_checkpoint(p: RunFolder, name: str) -> dict[str, Any]:
    """Every benchmark suite on checkpoint `name`, then greedy exact match on the unseen-tools split."""
    b = p.cfg.benchmarks
    model, tok = load(p.model_dir(name), run_device(p.cfg))
    model.eval()
    backend = HFBackend(model=model, tokenizer=tok, batch_size=b.batch_size, name=f"quickstart-{name}")
    controls = Controls(template=evaluation_template(p))
    sampling = Sampling(temperature=0.0, max_new_tokens=b.max_new_tokens, batch_size=b.batch_size)
    results: dict[str, Any] = {}
    for bench, categories in b.suites.items():
        wall, cpu = time.perf_counter(), time.process_time()
        data_dir = Path(b.data_dir) / bench if b.data_dir else None  # else $TOOLTUNE_DATA_DIR/<benchmark>
        with PeakMemory() as memory:  # a bar per benchmark: entries done of the subset's size
            options = EvalOptions(out=str(p.out / "evals" / name / bench), categories=categories,
                                  data_dir=str(data_dir or ""), resume=True,
                                  subset=int(b.subset.get(bench, 0)), subset_seed=b.subset_seed,
                                  controls=controls, sampling=sampling, model=str(p.model_dir(name)))
            summary = evaluate(bench, [(0, backend)], options)
        scores, errors = summary["scores"], summary.get("standard_errors", {})
        cats = sorted({k.split(".")[1] for k in scores if k.startswith("categories.")})
        key = _headline_key(str(b.headline.get(bench, "")), scores, cats)
        results[bench] = {
            "run": str(p.out / "evals" / name / bench), "scores": scores, "standard_errors": errors,
            "subset": summary.get("subset"), "entries": summary["n_entries"], "headline_key": key,
            "headline": scores.get(key) if key else None, "headline_se": errors.get(key, 0.0) if key else 0.0,
            "timing": {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                       "peak_rss_mb": memory.peak_mb},
        }
    sp = p.splits()
    greedy_backend = HFBackend(model=model, tokenizer=tok, batch_size=p.cfg.train.diagnostics.eval_batch_size,
                               name=f"quickstart-{name}")
    wall = time.perf_counter()
    with PeakMemory() as memory:
        out = {"benchmarks": results,
               "unseen_tools": greedy(p, greedy_backend, sp["unseen_tools"], progress="unseen tools")}
    out["splits_timing"] = {"wall_s": time.perf_counter() - wall, "peak_rss_mb": memory.peak_mb}
    return out


def _eval_stage(name: str) -> Any:
    def stage(p: RunFolder) -> dict[str, Any]:
        return evaluate_checkpoint(p, name)

    stage.__name__ = f"stage_eval_{name}"
    return stage


def real_profile() -> Profile:
    """The `real` profile's stages, their functions, descriptions, headlines, splits and report."""
    functions = {"data": stage_real_data, "model": stage_real_model, "sft": stages.stage_sft,
                 "screen": stage_screen, "grpo": stages.stage_grpo,
                 "sft_continued": stages.stage_sft_continued,
                 **{f"eval_{c}": _eval_stage(c) for c in CHECKPOINTS}}
    return Profile(REAL_STAGES, functions, REAL_DESCRIPTIONS, real_headline, REAL_SPLITS, write_real_report)


def base_model_path(model: str) -> Path:
    """The `model` setting as a folder; a one-line error naming the key when it holds no model."""
    path = Path(model)
    if not (path / "config.json").is_file():
        raise ConfigError(f"model: {model} is not a model folder (no config.json); `make smollm2` writes "
                          "models/smollm2-135m-instruct, or pass --model DIR")
    return path
