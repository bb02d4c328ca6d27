"""Entries whose generation failed for good: recorded, scored as a missing answer, counted, bounded.

An entry the backend could not generate (`tooltune.generation.GenerationFailure`: an endpoint's retries
spent, a status retrying cannot fix, a local model's prompt longer than its context) is a verdict like
any other: not valid, its error ``generation_failed: <reason>``, and ``generation_failed: <kind>`` in its
record, so the benchmark scores it as it scores a missing answer and the run goes on. No completion is
written for it (the completions file stays a predictions file of real answers). A resumed run keeps
these verdicts unless asked to generate the failed entries again (`drop_failed`).

`FailureGate` decides when failures stop a run (`TooManyFailures`, which leaves what is written in
place for `--resume`):

- more than `FailurePolicy.max_failed` entries of the run failed (the run's own threshold; -1: none);
- `FailurePolicy.max_failed_in_a_row` entries in a row failed with no answer between them: a server or
  a setting that fails every request. These are held back, not recorded, until an answer arrives, so
  the plain `--resume` after fixing the cause asks them again.

`failure_summary` is the part of summary.json that counts them, apart from wrong answers.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune.config import option
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import BackendError, GenerationFailure

logger = logging.getLogger(__name__)

FAILED_KEY = "generation_failed"
"""The verdict record's key holding the failure's kind (absent for an entry that was answered)."""
SHOWN_IDS = 20
"""Failed ids named in the one-line count (all of them are in summary.json)."""


class TooManyFailures(BackendError):
    """The run stopped because too many entries failed to generate (`FailureGate`)."""


@dataclass
class FailurePolicy:
    """When entries that fail to generate stop an evaluation (`tooltune eval` flags)."""

    max_failed: int = option(
        -1,
        "Stop the run (exit status 3) once more than N entries failed to generate; what is written is "
        "kept and --resume continues. -1 = no limit: failed entries are scored as missing answers and the "
        "run exits 0.",
        min=-1,
    )
    max_failed_in_a_row: int = option(
        20,
        "Stop the run (exit status 3) when this many entries in a row failed to generate with no answer "
        "between them (a server or a setting that fails every request); they are not recorded, so "
        "--resume asks them again. 0 = never.",
        min=0,
    )
    retry_failed: bool = option(
        False, "With --resume: generate again the entries whose generation failed (kept otherwise)."
    )


def failed_record(id_: str, category: str, seed: Any, failure: GenerationFailure) -> dict[str, Any]:
    """The verdict record of an entry whose generation failed for good."""
    return {**Verdict(id_, category, False, f"{FAILED_KEY}: {failure.reason}").to_dict(), "seed": seed,
            FAILED_KEY: failure.kind}


def is_failed(record: Mapping[str, Any]) -> bool:
    return bool(record.get(FAILED_KEY))


Record = Callable[[dict[str, Any]], None]
"""Writes one verdict record."""


class FailureGate:
    """Counts failures as they come and stops the run when `policy` says so (module docstring); the
    failures it lets through go to the `record` each call is given. `before` is the number of failed
    entries already in the run (a resumed run)."""

    def __init__(self, policy: FailurePolicy, before: int = 0) -> None:
        self.policy = policy
        self.failed = before
        self.held: list[dict[str, Any]] = []

    def flush(self, record: Record) -> None:
        """Record the failures held back: an entry was answered after them, or the seed is over, so they
        are real, one-entry failures."""
        held, self.held = self.held, []
        for rec in held:
            record(rec)

    def fail(self, rec: dict[str, Any], record: Record) -> None:
        """One entry failed for good (its record from `failed_record`)."""
        self.failed += 1
        limit = self.policy.max_failed
        if 0 <= limit < self.failed:
            self.flush(record)
            record(rec)
            entries = "entry" if self.failed == 1 else "entries"
            raise TooManyFailures(f"{self.failed} {entries} failed to generate, more than --max-failed "
                                  f"{limit}; the last: {rec['id']}: {rec['error']}; the run stopped (what is "
                                  "written is kept: --resume continues, --retry-failed asks the failed "
                                  "entries again)")
        self.held.append(rec)
        row = self.policy.max_failed_in_a_row
        if row and len(self.held) >= row:
            raise TooManyFailures(f"the last {len(self.held)} entries in a row failed to generate, none "
                                  f"answered (the last: {rec['id']}: {rec['error']}); the run stopped "
                                  "without recording them: fix the server or the settings and --resume")


def count_failed(records: Iterable[Mapping[str, Any]]) -> int:
    return sum(1 for r in records if is_failed(r))


def failure_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """summary.json's ``generation_failures``: how many entries failed to generate (scored as missing
    answers, counted apart from wrong answers), by kind, and their ids per seed."""
    failed = [r for r in records if is_failed(r)]
    kinds: dict[str, int] = {}
    ids: dict[str, list[str]] = {}
    for r in failed:
        kinds[str(r[FAILED_KEY])] = kinds.get(str(r[FAILED_KEY]), 0) + 1
        ids.setdefault(str(r.get("seed", 0)), []).append(str(r["id"]))
    return {"entries": len(failed), "by_kind": dict(sorted(kinds.items())),
            "ids": {s: sorted(v) for s, v in sorted(ids.items())}}


def failure_line(summary: Mapping[str, Any]) -> str | None:
    """One line counting the failed entries and naming their ids (the first `SHOWN_IDS`), or None."""
    failed = summary.get("generation_failures") or {}
    count = failed.get("entries", 0)
    if not count:
        return None
    seeds = failed.get("ids") or {}
    many = len(seeds) > 1
    named = [f"{i} (seed {s})" if many else i for s, ids in seeds.items() for i in ids]
    more = f" and {len(named) - SHOWN_IDS} more" if len(named) > SHOWN_IDS else ""
    kinds = ", ".join(f"{k} {n}" for k, n in (failed.get("by_kind") or {}).items())
    return (f"generation failed for {count} entr{'y' if count == 1 else 'ies'} ({kinds}), scored as missing "
            f"answers: {', '.join(named[:SHOWN_IDS])}{more}")


def drop_failed(path: str | os.PathLike) -> int:
    """Remove the verdicts of failed entries from a verdicts file (`--retry-failed`), so that a resumed
    run generates them again; returns how many. Other lines, readable or not, stay as they are."""
    path = Path(path)
    if not path.exists():
        return 0
    kept, dropped = [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            if isinstance(rec, dict) and is_failed(rec):
                dropped += 1
            else:
                kept.append(line)
    if dropped:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text("".join(kept), encoding="utf-8")
        os.replace(tmp, path)
        logger.info("%s: %d failed entries will be generated again", path, dropped)
    return dropped
