"""Tool-N1 preprocessing: raw records -> clean single-step samples, every record accounted for.

Tool-N1 (arXiv 2505.00024, Sec. 3.1 and Table 1) unifies xLAM and ToolACE by: discarding samples whose
answer calls a tool absent from the candidate list, samples that fail JSON or call parsing, and samples
with formatting inconsistencies; segmenting each multi-turn dialogue into one sample per assistant
tool-call step with the preceding turns as history. On top of that, optionally: no-call samples at
assistant text turns, irrelevance augmentation (the answer's tools removed from the candidates, no call
expected), deduplication, and a seeded train/validation split.

Accounting, per source (checked before anything is reported):
  records_in = records_kept + sum(records_rejected by reason)
  samples_produced + samples_augmented = samples_kept + sum(samples_rejected by reason)
  samples_kept = train + val
A record is kept when at least one of its samples is kept; otherwise it is rejected with its first
reason (a record-level error, or the reason its first step was dropped).

Each record is isolated: whatever reading or converting it raises (a line that is not UTF-8 or not
JSON, nesting too deep for the JSON decoder, an integer over Python's digit limit, a RecursionError,
a value of an unexpected type) rejects that record with a reason, and the run goes on. A sample that
holds a non-finite number or nests deeper than `MAX_RECORD_DEPTH` is rejected (`non_finite_number`,
`too_deep`) before it is written, so train.jsonl and val.jsonl always read back with `read_jsonl`.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml
from tqdm import tqdm

from tooltune.config import option
from tooltune.data.decontaminate import BenchmarkIndex, load_index, overlap_counts
from tooltune.data.sources import RecordError, Rejection, get_source
from tooltune.data.sources.base import RawRecord, as_record_error, describe, infer_category
from tooltune.data.stats import SourceStats, format_table, total
from tooltune.matching import call_key
from tooltune.schema import MAX_RECORD_DEPTH, RecordValueError, Sample, dumps_record

__all__ = [
    "PrepareConfig",
    "SourceStats",
    "check_sample",
    "dedupe_key",
    "format_table",
    "prepare",
    "split_of",
]

logger = logging.getLogger(__name__)

CHECK_ARGUMENTS = ("off", "unknown", "strict")


@dataclass
class PrepareConfig:
    """Options of `tooltune data prepare` (also loadable from YAML with `from_yaml`)."""

    sources: list[tuple[str, str]] = field(
        default_factory=list,
        metadata={"help": "(source name, input) pairs; input is a file, a folder, or hf:<dataset id>"},
    )
    out: str = option("data/prepared", "output folder")
    val_fraction: float = option(0.05, "share of records sent to val.jsonl", min=0, max_exclusive=1)
    seed: int = option(0, "seed of the split and the augmentation draw")
    no_call_samples: bool = option(
        False, "also emit a no-call sample at each assistant text turn of multi-turn dialogues"
    )
    irrelevance_augment: float = option(
        0.0, "share of samples copied with the answer's tools removed and no call expected", min=0, max=1
    )
    dedupe: bool = option(True, "drop samples identical in prompt, tools and answer")
    check_arguments: str = option(
        "unknown",
        "off | unknown (reject arguments the tool lacks) | strict (also missing required ones)",
        CHECK_ARGUMENTS,
    )
    decontaminate: bool = option(
        False, "reject samples whose user turns copy a user turn of BFCL, API-Bank or ACEBench (equal, "
        "contained, or a shared 13-word run; reasons benchmark_overlap_<name>; docs/data.md)"
    )
    eval_data: str | None = option(
        None, "folder holding apibank/ and acebench/ for decontaminate (default: $TOOLTUNE_DATA_DIR); "
        "BFCL's turns come from the bfcl-eval package"
    )
    hub_split: str = option("train", "split to load for hf:<id> inputs")
    limit: int | None = option(None, "stop after this many records per source", min=0)
    progress: bool = option(True, "show a progress bar")

    @classmethod
    def from_yaml(cls, path: str) -> PrepareConfig:

        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
        data["sources"] = [tuple(x) for x in data.get("sources", [])]
        return cls(**data)


class _Writer:
    """train/val/rejected JSONL written to temporary names and renamed at the end (no half outputs)."""

    def __init__(self, out: str) -> None:
        os.makedirs(out, exist_ok=True)
        self.out = out
        # the three files stay open across the whole run and are closed (and renamed) by close()
        self.files = {
            k: open(os.path.join(out, f".{k}.jsonl.tmp"), "w", encoding="utf-8")  # noqa: SIM115
            for k in ("train", "val", "rejected")
        }

    def write(self, kind: str, line: str) -> None:
        self.files[kind].write(line + "\n")

    def reject(
        self,
        source: str,
        position: dict[str, Any],
        level: str,
        reason: str,
        field_name: str,
        detail: str,
        **extra: Any,
    ) -> None:
        """One rejected.jsonl line: what was dropped, why, and where it came from.

        The dropped record (`raw`) or sample (`sample`) is kept as JSON; one that JSON cannot hold
        (NaN, nesting too deep) is kept as text instead, under `raw_text` / `sample_text`.
        """
        line = {
            "source": source,
            "position": position,
            "level": level,
            "reason": reason,
            "field": field_name,
            "detail": detail,
            **extra,
        }
        try:
            text = dumps_record(line, max_depth=MAX_RECORD_DEPTH + 1, default=str)
        except RecordValueError:
            for key in ("raw", "sample"):
                if key in line:
                    line[f"{key}_text"] = _as_text(line.pop(key))
            text = dumps_record(line, default=str)
        self.write("rejected", text)

    def close(self, ok: bool) -> None:
        for k, f in self.files.items():
            f.close()
            tmp = os.path.join(self.out, f".{k}.jsonl.tmp")
            if ok:
                os.replace(tmp, os.path.join(self.out, f"{k}.jsonl"))
            else:
                os.remove(tmp)


def _as_text(value: Any) -> str:
    """JSON-like text of a value that strict JSON cannot hold (NaN stays NaN), for rejected.jsonl."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__} too deep to write>"


def check_sample(sample: Sample, check_arguments: str = "unknown") -> Rejection | None:
    """Tool-N1's filters on one converted sample; None when it is fine."""
    names = {t.name: t for t in sample.tools}  # no tools at all is fine for a no-call answer
    for i, call in enumerate(sample.answer):
        tool = names.get(call.name)
        if tool is None:
            return Rejection(
                "tool_not_in_candidates",
                f"answer[{i}].name",
                f"{call.name!r} is not among the candidate tools",
                sample.id,
            )
        if check_arguments == "off":
            continue
        props = tool.properties
        if props and tool.parameters.get("additionalProperties") is not True:
            unknown = [k for k in call.arguments if k not in props]
            if unknown:
                return Rejection(
                    "unknown_argument",
                    f"answer[{i}].arguments.{unknown[0]}",
                    f"{call.name!r} defines no parameter {unknown[0]!r}",
                    sample.id,
                )
        if check_arguments == "strict":
            missing = [k for k in tool.required if k not in call.arguments]
            if missing:
                return Rejection(
                    "missing_required_argument",
                    f"answer[{i}].arguments.{missing[0]}",
                    f"required parameter {missing[0]!r} of {call.name!r} not given",
                    sample.id,
                )
    if not sample.messages or sample.messages[-1]["role"] not in ("user", "tool"):
        return Rejection(
            "formatting_inconsistent", "messages", "the prompt must end with a user or tool turn", sample.id
        )
    if not any(m["role"] == "user" and m["content"].strip() for m in sample.messages):
        return Rejection("empty_query", "messages", "no non-empty user turn", sample.id)
    return None


def dedupe_key(sample: Sample) -> bytes:
    """Identity of a training example: the prompt turns, the offered tool names and the answer multiset."""
    payload = json.dumps(
        [sample.messages, sorted(t.name for t in sample.tools), sorted(call_key(c) for c in sample.answer)],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).digest()


def split_of(group: str, seed: int, val_fraction: float) -> str:
    """Seeded, order-independent split by record, so all steps of one dialogue land on the same side."""
    h = hashlib.blake2b(f"{seed}:{group}".encode(), digest_size=8).digest()
    return "val" if int.from_bytes(h, "big") / 2**64 < val_fraction else "train"


def irrelevance_variant(sample: Sample) -> Sample | None:
    """The sample with its answer's tools removed from the candidates, expecting no call (None if no
    candidate would remain or it already expects no call)."""
    if not sample.answer:
        return None
    used = {c.name for c in sample.answer}
    tools = [t for t in sample.tools if t.name not in used]
    if not tools:
        return None
    return Sample(
        id=f"{sample.id}#irrelevant",
        source=sample.source,
        category=infer_category(sample.messages, tools, []),
        messages=sample.messages,
        tools=tools,
        answer=[],
        meta={**sample.meta, "augmented": "irrelevance", "origin": sample.id},
    )


def drawn_irrelevance_variant(sample: Sample, share: float, seed: int) -> Sample | None:
    """`irrelevance_variant(sample)` for a `share` of samples, drawn per sample (a per-sample RNG keeps the
    draw independent of input order and of other sources); None for the rest."""
    if share <= 0 or random.Random(f"{seed}:{sample.id}").random() >= share:
        return None
    return irrelevance_variant(sample)


def _convert_options(module: Any, config: PrepareConfig) -> dict[str, Any]:
    params = inspect.signature(module.convert).parameters
    return {k: v for k, v in {"no_call_samples": config.no_call_samples}.items() if k in params}


def _progress(it: Iterator[RawRecord], desc: str, enabled: bool) -> Iterator[RawRecord]:
    if not enabled:
        return it

    return iter(tqdm(it, desc=desc, unit="rec", mininterval=0.5))


def prepare(config: PrepareConfig) -> dict[str, SourceStats]:
    """Run the pipeline; writes train.jsonl, val.jsonl, rejected.jsonl and stats.json under `config.out`.

    Raises DataFileError (unusable file) or SourceUnavailable (hub offline); record problems never raise.
    """
    if config.check_arguments not in CHECK_ARGUMENTS:
        raise ValueError(f"check_arguments must be one of {CHECK_ARGUMENTS}")
    if not config.sources:
        raise ValueError("no sources given")
    index = load_index(config.eval_data) if config.decontaminate else None  # before anything is written
    writer = _Writer(config.out)
    stats: dict[str, SourceStats] = {}
    seen: dict[bytes, str] = {}
    ok = False
    try:
        for name, spec in config.sources:
            st = stats.setdefault(name, SourceStats())
            _run_source(name, spec, config, st, writer, seen, index)
        for st in stats.values():
            st.check()
        ok = True
    finally:
        writer.close(ok)
    with open(os.path.join(config.out, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "config": _config_dict(config),
                "sources": {k: v.to_dict() for k, v in stats.items()},
                "total": total(stats).to_dict(),
                **({"decontamination": {
                    "benchmark_user_turns": dict(index.turns),
                    "samples_rejected": overlap_counts(total(stats).samples_rejected),
                }} if index is not None else {}),
            },
            f,
            indent=2,
        )
    return stats


def _config_dict(config: PrepareConfig) -> dict[str, Any]:
    d = asdict(config)
    d["sources"] = [list(x) for x in config.sources]
    return d


def _fault(e: Exception, rec: RawRecord, logged: set[str]) -> RecordError:
    """`as_record_error(e)`; an exception of a kind not anticipated (`conversion_error`) is logged with
    its traceback, once per exception type and source, so that a bug does not hide among rejections."""
    err = as_record_error(e)
    if err.reason == "conversion_error" and type(e).__name__ not in logged:
        logged.add(type(e).__name__)
        logger.warning("%s: rejected: %s", describe(rec.position), err.message, exc_info=e)
    return err


def _convert(
    module: Any, rec: RawRecord, options: dict[str, Any], logged: set[str]
) -> tuple[bool, list[Sample | Rejection] | RecordError]:
    """(multi-turn?, the record's samples and rejections) or, if the record is refused, its RecordError.

    Never raises: a record the reader could not decode comes with its error, and whatever converting
    a hostile record raises becomes the record's rejection.
    """
    if rec.error is not None:
        return False, rec.error
    multi = False
    try:
        multi = bool(module.is_multi_turn(rec.data))
        return multi, module.convert(rec.data, rec.position, **options)
    except Exception as e:  # one hostile record must not stop the run: it is rejected with the cause
        return multi, _fault(e, rec, logged)


def _check(
    item: Sample, rec: RawRecord, config: PrepareConfig, logged: set[str], index: BenchmarkIndex | None
) -> tuple[Rejection | None, str, bytes | None]:
    """(why the sample is refused or None, its JSON line, its dedupe key); never raises.

    Refused: values no record may hold (non-finite numbers, nesting deeper than `MAX_RECORD_DEPTH`),
    then Tool-N1's filters (`check_sample`), then a copy of a benchmark's user turn (`index`, when
    decontaminating). Whatever a hostile sample raises is its rejection.
    """
    try:
        line = dumps_record(item.to_dict(), where="")
        rej = check_sample(item, config.check_arguments)
        if rej is None and index is not None:
            rej = index.check(item)
        key = dedupe_key(item) if rej is None and config.dedupe else None
    except Exception as e:  # a hostile sample must not stop the run: it is rejected with the cause
        err = _fault(e, rec, logged)
        return Rejection(err.reason, err.field, err.message, item.id), "", None
    return rej, line, key


def _raw_payload(rec: RawRecord) -> dict[str, Any]:
    return {"raw": rec.data} if rec.error is None else {"raw_text": rec.text}


def _run_source(
    name: str, spec: str, config: PrepareConfig, st: SourceStats, writer: _Writer, seen: dict[bytes, str],
    index: BenchmarkIndex | None,
) -> None:
    module = get_source(name)
    options = _convert_options(module, config)
    logged: set[str] = set()
    records = module.read(spec, split=config.hub_split, lenient=True)
    for n, rec in enumerate(_progress(records, name, config.progress)):
        if config.limit is not None and n >= config.limit:
            break
        st.records_in += 1
        multi, items = _convert(module, rec, options, logged)
        if multi:
            st.records_multi_turn += 1
        else:
            st.records_single_turn += 1
        if isinstance(items, RecordError):
            e = items
            st.records_rejected[e.reason] += 1
            writer.reject(name, rec.position, "record", e.reason, e.field, e.message, **_raw_payload(rec))
            continue
        if not items:
            st.records_rejected["no_tool_call_steps"] += 1
            writer.reject(
                name, rec.position, "record", "no_tool_call_steps", "", "the record holds no usable step"
            )
            continue
        # the split key ignores the folder, so moving the input keeps the split
        group = describe({**rec.position, "file": os.path.basename(str(rec.position.get("file", "")))})
        kept, first_reason = 0, None
        for item in _with_augmentation(items, config, st):
            if isinstance(item, Rejection):
                rej, line, key = item, "", None
            else:
                item.meta.setdefault("position", rec.position)
                rej, line, key = _check(item, rec, config, logged, index)
            if key is not None:
                if key in seen:
                    rej = Rejection("duplicate", "", f"same prompt, tools and answer as {seen[key]}", item.id)
                else:
                    seen[key] = item.id
            if rej is not None:
                st.samples_rejected[rej.reason] += 1
                first_reason = first_reason or rej.reason
                extra = (
                    {"sample": item.to_dict()}
                    if isinstance(item, Sample) and rej.reason != "duplicate"
                    else {}
                )
                writer.reject(
                    name,
                    rec.position,
                    "sample",
                    rej.reason,
                    rej.field,
                    rej.detail,
                    sample_id=rej.sample_id,
                    **extra,
                )
                continue
            part = split_of(group, config.seed, config.val_fraction)
            writer.write(part, line)
            kept += 1
            st.samples_kept += 1
            st.categories[item.category] += 1
            setattr(st, part, getattr(st, part) + 1)
            if multi:
                st.kept_from_multi_turn += 1
            else:
                st.kept_from_single_turn += 1
        if kept:
            st.records_kept += 1
        else:
            st.records_rejected[first_reason or "no_tool_call_steps"] += 1


def _with_augmentation(
    items: list[Sample | Rejection], config: PrepareConfig, st: SourceStats
) -> Iterator[Sample | Rejection]:
    for item in items:
        st.samples_produced += 1
        yield item
        if isinstance(item, Sample):
            variant = drawn_irrelevance_variant(item, config.irrelevance_augment, config.seed)
            if variant is not None:
                st.samples_augmented += 1
                yield variant
