"""API-Bank's level files and their samples, each carrying its ground truth from the dialogue file it was
cut from.

Samples are read through the data source adapter (`tooltune.data.sources.apibank`), so the prompt shows the
same dialogue and API descriptions as training data would; each sample also carries its ground truth as
the official evaluator builds it from the dialogue file (`truth.Truth`, in `meta["apibank_truth"]`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from tooltune.data.sources import get_source
from tooltune.evaluation.apibank.truth import dialogue_files, truth_for
from tooltune.schema import Sample

LEVELS = ("level-1", "level-2")
TRUTH_KEY = "apibank_truth"


def data_files(data_dir: str | os.PathLike, levels: Iterable[str] = LEVELS) -> list[str]:
    """The level files (`level-N-api.json`); their dialogue folders must exist too (`dialogue_files`)."""
    levels = list(levels)
    files = [str(Path(data_dir) / f"{lv}-api.json") for lv in levels]
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise FileNotFoundError(f"API-Bank file(s) not found: {', '.join(missing)}")
    dialogue_files(data_dir, levels)
    return files


def load_samples(data_dir: str | os.PathLike, levels: Iterable[str] = LEVELS) -> list[tuple[str, Sample]]:
    """(level, Sample) pairs; ids are `<level>/<dialogue file>#<id>` (unique across levels); each sample's
    `meta["apibank_truth"]` holds its ground truth from the dialogue file."""
    levels = list(levels)
    src = get_source("apibank")
    out = []
    for lv, path in zip(levels, data_files(data_dir, levels)):
        for rec in src.read(path):
            for s in src.convert(rec.data, rec.position):
                if isinstance(s, Sample):
                    s.id = f"{lv}/{s.id.split(':', 1)[-1]}"
                    truth = truth_for(data_dir, lv, str(s.meta.get("file")), int(s.meta.get("raw_id")))
                    s.meta[TRUTH_KEY] = truth.to_dict()
                    out.append((lv, s))
    return out
