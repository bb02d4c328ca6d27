"""The resumable verdict log of a run folder: `verdicts.jsonl`, one line per (seed, id).

Verdicts are appended and flushed as they are produced, so a killed run loses at most the line it was
writing and a resumed run skips every entry already scored (`tooltune.evaluation.runner`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tooltune.rundir import drop_torn_tail

logger = logging.getLogger(__name__)


class VerdictLog:
    """Append-only `verdicts.jsonl`: one line per (seed, id), flushed as produced.

    Reopening with `resume=True` keeps the finished lines and reports which (seed, id) pairs are done:
    a torn last line from a kill is cut off before anything is appended, and a (seed, id) that
    appears more than once counts once (its first line; the file is rewritten without the repeats
    and without lines that are not verdicts). Without resume the file starts empty.
    """

    def __init__(self, path: str | os.PathLike, resume: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records: list[dict[str, Any]] = []
        self.done: set[tuple[Any, str]] = set()
        if resume and self.path.exists():
            self._reload()
        else:
            self.path.write_text("", encoding="utf-8")
        self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (held open while the run appends)

    def _reload(self) -> None:
        """Read the finished verdicts back, rewriting the file when it held repeats or other lines."""
        drop_torn_tail(self.path)
        dropped = repeated = 0
        for line in self.path.read_text(encoding="utf-8").split("\n"):  # not splitlines: U+2028
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                rec = None
            if not isinstance(rec, dict) or "id" not in rec:
                dropped += 1
                continue
            key = (rec.get("seed", 0), rec["id"])
            if key in self.done:
                repeated += 1
                continue
            self.done.add(key)
            self.records.append(rec)
        if dropped or repeated:
            logger.warning("%s: dropping %d line(s) that are not verdicts and %d repeated (seed, id) "
                           "line(s)", self.path, dropped, repeated)
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records),
                           encoding="utf-8")
            os.replace(tmp, self.path)

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one verdict; a (seed, id) already recorded is not recorded again."""
        rec = dict(record)
        key = (rec.get("seed", 0), rec["id"])
        if key in self.done:
            logger.warning("%s: %s of seed %s is already recorded; not adding it again", self.path,
                           key[1], key[0])
            return
        self.records.append(rec)
        self.done.add(key)
        self._f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> VerdictLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
