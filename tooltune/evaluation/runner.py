"""Run a benchmark over seeds with any backend: prompts -> completions -> verdicts -> summary + manifest.

Output folder: `verdicts.jsonl` (one line per seed and entry: {"id", "category", "valid", "error",
"seed"}, appended as produced, so an interrupted run loses nothing and `resume=True` skips finished
entries), `completions_seed<S>.jsonl` (the raw completions as a predictions file, replayable),
`summary.json` (scores of each seed, mean ± std over seeds, each score's standard error over entries,
the subset when one was chosen, the formulas; with replayed predictions,
per seed how the file fits the entries: `predictions_report`), `manifest.json` and
`run.json` (the manifest fields that define the results, `manifest.run_identity`). Each answer is
recorded as it arrives; an entry whose generation fails for good is a failed verdict, scored as a
missing answer and counted in summary.json's ``generation_failures`` (`tooltune.evaluation.failures`).

One folder holds one run, written by one process (`tooltune.rundir`): the folder is locked while the
run writes (another writer gets `RunFolderBusy`); a new run needs a new or empty folder, and
`resume=True` continues only the run the folder holds, with the same settings (`RunMismatch` naming
every difference otherwise). On resume, a line cut by a kill at the end of `verdicts.jsonl` or a
`completions_seed<S>.jsonl` is dropped before appending, a completion whose verdict was lost is dropped
(it is generated again), and each (seed, id) counts once.

Defaults are the evaluation protocol, the same for the library and `tooltune eval`: `Sampling()`
(temperature 0.7) over `RunOptions().seeds` (3) seeds. `evaluate` takes one `EvalOptions`
(`tooltune.evaluation.options`). API-Bank and ACEBench data are read only from
a folder the caller names: `data_dir`, or else `$TOOLTUNE_DATA_DIR/<benchmark>`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from tqdm.auto import tqdm

from tooltune.config import ConfigError
from tooltune.evaluation.benchmark import (
    BENCHMARKS,
    DATA_DIR_ENV,
    DataDirError,
    EpisodeContext,
    Prepared,
    SimulatesUsers,
    Task,
    benchmark_data_dir,
    require,
)
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.failures import (
    FailureGate,
    count_failed,
    drop_failed,
    failed_record,
    failure_summary,
)
from tooltune.evaluation.manifest import RETIRED_IDENTITY, build_manifest, run_identity
from tooltune.evaluation.options import EvalOptions, RunOptions
from tooltune.evaluation.subset import SubsetSpec, select
from tooltune.evaluation.uncertainty import aggregate_seeds, standard_errors
from tooltune.evaluation.verdict import Verdict
from tooltune.evaluation.verdict_log import VerdictLog
from tooltune.generation import (
    Backend,
    GenerationFailure,
    GenerationRequest,
    Tolerant,
    stream_results,
)
from tooltune.prompts import check_history_reasoning, resolve_native
from tooltune.rundir import RunLock, check_identity, drop_torn_tail, write_identity

logger = logging.getLogger(__name__)

__all__ = ["DATA_DIR_ENV", "DataDirError", "EvalOptions", "Prepared", "RunOptions", "SubsetSpec", "Task",
           "benchmark_data_dir", "evaluate", "prepare", "prepare_subset", "run_seed"]


def prepare(benchmark: str, categories: Sequence[str] | str | None, controls: Controls,
            data_dir: str | os.PathLike | None = None, user_simulator: bool = False) -> Prepared:
    """The registered `benchmark`'s items under `controls` (as its own controls, `Benchmark.controls`);
    its data folder is resolved here (`benchmark_data_dir`). Multi-turn entries that need a user
    simulator run only with `user_simulator` (`SimulatesUsers.prepare_with_user`; `MissingCapability`
    for a benchmark without simulated users)."""
    bench = BENCHMARKS[benchmark]
    controls = bench.controls(controls)
    if user_simulator:
        users = require(bench, SimulatesUsers, "simulated-user entries")
        return users.prepare_with_user(categories, controls, bench.data_dir(data_dir))
    return bench.prepare(categories, controls, bench.data_dir(data_dir))


def prepare_subset(benchmark: str, categories: Sequence[str] | str | None, controls: Controls,
                   data_dir: str | os.PathLike | None = None, user_simulator: bool = False,
                   subset: SubsetSpec | None = None) -> tuple[Prepared, dict[str, Any] | None]:
    """`prepare` restricted to `subset` (`tooltune.evaluation.subset.select`), with the subset's record
    (None for the whole benchmark)."""
    prep = prepare(benchmark, categories, controls, data_dir, user_simulator)
    return select(prep, subset or SubsetSpec(), BENCHMARKS[benchmark].subset_unit)


def _progress(total: int, desc: str) -> Any:
    return tqdm(total=total, desc=desc, unit="entry", dynamic_ncols=True)


def run_seed(prep: Prepared, backend: Backend, seed: int, options: EvalOptions, log: VerdictLog,
             progress: Any = None, completions: TextIO | None = None, gate: FailureGate | None = None
             ) -> None:
    """Generate and score every unfinished task of one seed under `options` (its controls, sampling,
    `partial`, user simulator); verdicts go to `log` as each answer comes. With `options.stop_decided`
    a greedy completion ends as soon as its verdict is decided (`Task.decided`; a sampled one runs to
    its end: a row leaving its batch early changes the other rows' random draws).

    Raw completions go to `completions` (a predictions file: replay it with `--predictions`). An entry
    whose generation fails for good goes to `gate` (`tooltune.evaluation.failures`; default: one of
    `options.failures`), which records it as a failed verdict or stops the run.
    Episodes that keep state between entries write it under `options.out` (BFCL's memory snapshots).
    """
    controls, sampling = options.controls or Controls(), options.sampling
    user_backend = options.user_backend
    has = getattr(backend, "has", None)
    unreadable: dict[str, str] = getattr(backend, "unreadable", None) or {}

    def record(v: Verdict, result: Any = None) -> None:
        if completions is not None and result is not None:
            completions.write(json.dumps({"id": v.id, "result": result}, ensure_ascii=False) + "\n")
            completions.flush()
        log.add({**v.to_dict(), "seed": seed})
        if progress is not None:
            progress.update(1)

    def record_failed(rec: dict[str, Any]) -> None:
        log.add(rec)
        if progress is not None:
            progress.update(1)

    gate = gate or FailureGate(options.failures)
    todo = [t for t in prep.tasks if (seed, t.id) not in log.done]
    if has is not None:  # replay: entries without a prediction fail (or are skipped with `partial`)
        for t in [t for t in todo if not has(t.id)]:
            if t.id in unreadable:  # its line could not be read: failed, naming the file and line
                record(Verdict(t.id, t.category, False, f"unreadable_prediction: {unreadable[t.id]}"))
            elif not options.partial:
                record(Verdict(t.id, t.category, False, "missing_prediction"))
        todo = [t for t in todo if has(t.id)]
    stop_decided = options.stop_decided and sampling.temperature == 0
    reqs = [GenerationRequest(t.messages, temperature=sampling.temperature,
                              max_new_tokens=sampling.max_new_tokens, seed=seed, id=t.id, tools=t.tools,
                              stop_when=t.decided if stop_decided else None)
            for t in todo]
    for i, got in stream_results(backend, reqs, sampling.batch_size):
        if isinstance(got, GenerationFailure):
            gate.fail(failed_record(todo[i].id, todo[i].category, seed, got), record_failed)
        else:
            gate.flush(record_failed)
            text = got[0] if got else ""
            record(todo[i].score(text), text)
    entries = [e for e in prep.episodes if (seed, e.id) not in log.done]
    if has is not None:
        missing = [e for e in entries if not has(e.id)]
        for e in missing:
            if e.id in unreadable:
                record(Verdict(e.id, e.category, False, f"unreadable_prediction: {unreadable[e.id]}"))
            elif not options.partial:
                record(Verdict(e.id, e.category, False, "missing_prediction"))
        entries = [e for e in entries if has(e.id)]
    if entries and prep.run_episodes is not None:
        tolerant = Tolerant(backend)  # one entry's failed request ends that entry, not the run
        user = Tolerant(user_backend) if user_backend is not None else None

        def record_episode(v: Verdict, result: Any = None) -> None:
            failure = tolerant.failures.get(v.id) or (user.failures.get(v.id) if user is not None else None)
            if failure is None:
                gate.flush(record_failed)
                record(v, result)
            else:
                gate.fail(failed_record(v.id, v.category, seed, failure), record_failed)

        run_dir = Path(options.out) if options.out else None
        prep.run_episodes(entries, EpisodeContext(tolerant, controls, sampling, seed, record_episode, user,
                                                  run_dir))
    gate.flush(record_failed)


def _keep_scored_completions(path: Path, scored: set[str]) -> None:
    """Drop the completions whose verdict a kill lost (the completion is written first), so the resumed
    run writes each entry's completion once and the file stays a valid predictions file."""
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    kept = [line for line in lines if _completion_id(line) in scored]
    if len(kept) != len(lines):
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text("".join(kept), encoding="utf-8")
        os.replace(tmp, path)


def _completion_id(line: str) -> str | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get("id") if isinstance(record, dict) else None


def _write_json(path: Path, obj: Any) -> None:
    """Write `obj` as JSON to `path` atomically (a kill leaves the old file or the new one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def predictions_sha256(backend: Backend) -> str | None:
    """sha256 of a replay backend's predictions (canonical JSON of id -> result); None for others."""
    predictions = getattr(backend, "predictions", None)
    if not isinstance(predictions, dict):
        return None
    text = json.dumps(predictions, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def predictions_report(prep: Prepared, backend: Backend) -> dict[str, Any] | None:
    """How a replayed predictions file fits the evaluated entries (None for other backends): ids given,
    ids that are no entry of this evaluation (`unknown_ids`: another category or benchmark, or a typo;
    ignored), entries without a prediction, ids whose line was unreadable, unreadable lines without an
    id, ids found on several lines (resolved as `--prediction-duplicates` said)."""
    predictions = getattr(backend, "predictions", None)
    if not isinstance(predictions, dict):
        return None
    unreadable = getattr(backend, "unreadable", None) or {}
    known = {t.id for t in prep.tasks} | {e.id for e in prep.episodes}
    given = set(predictions) | set(unreadable)
    unknown = sorted(given - known)
    if unknown:
        logger.warning("%s: %d id(s) are no entry of this evaluation and are ignored, e.g. %s", backend.name,
                       len(unknown), ", ".join(unknown[:5]))
    return {"ids": len(given), "unknown_ids": len(unknown), "unknown_examples": unknown[:10],
            "missing": len(known - given), "unreadable": len(unreadable),
            "unreadable_lines": len(getattr(backend, "unreadable_lines", None) or []),
            "duplicated_ids": len(getattr(backend, "duplicates", None) or {})}


def with_model_template(backends: Sequence[tuple[int, Backend]], controls: Controls) -> Controls:
    """`controls` holding the template the backends' model answers in (`Controls.with_template`): under a
    template whose tools go to the chat template (``native``), the local model's own format
    (`resolve_native`, which refuses a chat template that cannot render the tools), or, without a local
    model (an endpoint applies its template on the server; predictions; a scripted policy), the format
    an endpoint writes its calls back in. Local models whose formats differ cannot share one run."""
    tokenizers = {id(t): t for _, b in backends if (t := getattr(b, "tokenizer", None)) is not None}
    found = {resolve_native(t, controls.template, where="controls.template") for t in tokenizers.values()}
    if len(found) > 1:
        raise ConfigError(f"controls.template: {controls.template!r} resolves to {len(found)} different "
                          "formats for these local models; evaluate each model in a run of its own")
    template = found.pop() if found else resolve_native(None, controls.template, where="controls.template")
    return controls.with_template(template)


def _check_reasoning_history(
    prep: Prepared, backends: Sequence[tuple[int, Backend]], controls: Controls
) -> None:
    """Refuse a run whose record would say earlier reasoning is kept while the local model's chat template
    drops it (only entries with earlier assistant turns are affected). An endpoint applies its template
    server-side and cannot be checked."""
    has_history = bool(prep.episodes) or any(
        m.get("role") == "assistant" for t in prep.tasks for m in t.messages)
    if not has_history:
        return
    for _, backend in backends:
        tokenizer = getattr(backend, "tokenizer", None)
        if tokenizer is not None and getattr(tokenizer, "chat_template", None):
            check_history_reasoning(tokenizer, controls.prompt_template, controls.keep_reasoning,
                                    controls.history, where="controls.keep_reasoning")


def evaluate(benchmark: str, backends: Backend | Sequence[tuple[int, Backend]], options: EvalOptions
             ) -> dict[str, Any]:
    """Evaluate `benchmark` once per (seed, backend); write verdicts, summary and manifest to `options.out`.

    `backends`: (seed, backend) pairs, or one backend for seeds 0..options.seeds-1. `options` holds the
    rest (`EvalOptions`): without controls or sampling the protocol defaults apply (the benchmark's
    `Controls`, `Sampling()`: temperature 0.7), the same as `tooltune eval` without flags; `data_dir`:
    see `benchmark_data_dir`. `user_backend` plays the user in a `SimulatesUsers` benchmark's entries
    (ACEBench's agent_multi_turn, skipped without one; `MissingCapability` for a benchmark without
    simulated users). A subset (`subset`, `subset_seed`, `subset_ids`) restricts the run to fixed entries
    (recorded in the manifest and summary, part of the run's identity). The summary holds each score's
    standard error over entries (`uncertainty.standard_errors`). An entry whose generation fails for
    good is scored as a missing answer and counted in the summary's ``generation_failures``; `failures`
    says when failures stop the run (`failures.TooManyFailures`) and whether a resumed run generates the
    failed entries again (`tooltune.evaluation.failures`). `stop_decided` ends each greedy completion
    once its verdict is decided; it is recorded in the manifest and is not part of the run's identity
    (no verdict depends on it).

    `options.out` must be new or empty, or hold this same run when `options.resume` is set
    (`rundir.RunMismatch` otherwise); it is locked while the run writes (`rundir.RunFolderBusy` when
    another process holds it)."""
    if not options.out:
        raise ConfigError("out: evaluate needs an output folder (EvalOptions(out=...))")
    bench = BENCHMARKS[benchmark]
    if isinstance(backends, Backend):
        backends = [(s, backends) for s in range(options.seeds)]
    out = Path(options.out)
    controls = with_model_template(backends, bench.controls(options.controls))
    options = dataclasses.replace(options, controls=controls)  # what every seed runs under
    user_backend, sampling = options.user_backend, options.sampling
    prep, chosen = prepare_subset(benchmark, options.categories or None, controls, options.data_dir or None,
                                  user_backend is not None, options.subset_spec())
    _check_reasoning_history(prep, backends, controls)
    seeds = [s for s, _ in backends]
    cats = prep.categories
    names = ", ".join(b.name for _, b in backends)
    if user_backend is not None and prep.episodes:
        names += f" (user simulator: {user_backend.name})"
    digests = {str(s): d for s, b in backends if (d := predictions_sha256(b)) is not None}
    manifest = build_manifest(benchmark, cats, controls, seeds, options.model, names, prep.data_files,
                              asdict(sampling) | {"partial": options.partial}, prep.system_extra, digests,
                              chosen)
    manifest["stop_decided"] = options.stop_decided  # recorded, outside the identity: it changes no verdict
    identity = run_identity(manifest, bench.scoring_packages)
    n_items = len(prep.tasks) + len(prep.episodes)
    with RunLock(out):
        resuming = check_identity(out, identity, options.resume, retired=RETIRED_IDENTITY)
        if not resuming:
            write_identity(out, identity)
        if not resuming or not (out / "manifest.json").exists():  # a resumed run keeps its manifest
            _write_json(out / "manifest.json", manifest)
        if resuming and options.failures.retry_failed:
            drop_failed(out / "verdicts.jsonl")
        with VerdictLog(out / "verdicts.jsonl", resume=resuming) as log:
            todo = n_items * len(backends) - len(log.done)
            bar = _progress(todo, benchmark) if options.show_progress else None
            gate = FailureGate(options.failures, count_failed(log.records))
            try:
                for seed, backend in backends:
                    path = out / f"completions_seed{seed}.jsonl"
                    if resuming:
                        drop_torn_tail(path)
                        _keep_scored_completions(path, {i for s, i in log.done if s == seed})
                    with open(path, "a" if resuming else "w", encoding="utf-8") as f:
                        run_seed(prep, backend, seed, options, log, bar, f, gate)
            finally:
                if bar is not None:
                    bar.close()
            records = list(log.records)
        per_seed = {s: bench.scores([r for r in records if r.get("seed", 0) == s]) for s in seeds}
        summary = {"benchmark": benchmark, "seeds": seeds, "n_entries": n_items,
                   "scores": {k: v["mean"] for k, v in aggregate_seeds(per_seed).items()},
                   "mean_std": aggregate_seeds(per_seed),
                   "standard_errors": standard_errors(bench, records),
                   "subset": chosen,
                   "per_seed": {str(s): v for s, v in per_seed.items()}, "skipped": prep.skipped,
                   "scoring": controls.scoring, "generation_failures": failure_summary(records)}
        if bench.formulas:
            summary["formulas"] = dict(bench.formulas)
        reports = {str(s): r for s, b in backends if (r := predictions_report(prep, b)) is not None}
        if reports:
            summary["predictions"] = reports
        _write_json(out / "summary.json", summary)
    return summary
