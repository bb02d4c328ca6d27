"""What a resumed training run may continue from: the inputs it started with, and a checkpoint whose files
are whole.

**Inputs.** `run_inputs(cfg, ...)` names a run's inputs with their content digests
(`tooltune.rundir.content_digest`): ``data.train`` and ``data.val`` (the files, or the rows handed in
memory), and ``model.name_or_path`` (a local model folder by its files; a hub id by its name: pin a
revision by downloading it to a folder). `training.runner.train` records them in the run folder's
`run.json` and a resume refuses, naming the input and its file, when one has changed
(`rundir.check_inputs`).

**Checkpoints.** A checkpoint folder is complete when its marker files exist (our state file is written
last), but a disk that filled up or a copy that was cut can still leave a marked checkpoint with a torn
file. `verify_checkpoint` opens what a resume will read, cheaply: every JSON file parses, every
safetensors file is as long as its header says, every torch file (``.pt``, ``.pth``, ``.bin``: zip
archives) has a readable directory and no empty file is left. `last_complete_checkpoint` returns the
newest complete checkpoint that passes, and warns, naming the file, about each newer one it skips.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import struct
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tooltune.rundir import content_digest

logger = logging.getLogger(__name__)

DATA_INPUTS = ("data.train", "data.val")
"""The config keys of a run's data files."""
MODEL_INPUT = "model.name_or_path"
_TORCH_SUFFIXES = (".pt", ".pth", ".bin")


def _rows_digest(rows: Sequence[Any]) -> str:
    text = json.dumps(list(rows), sort_keys=True, ensure_ascii=False, default=str)
    return "rows-sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_inputs(
    cfg: Any,
    train_rows: Sequence[Any] | None = None,
    val_rows: Sequence[Any] | None = None,
) -> dict[str, tuple[str, str]]:
    """Input name -> (what it is, its digest) for a training config `cfg` (`TrainConfig`); rows handed
    in memory stand for the data files they replace."""
    out: dict[str, tuple[str, str]] = {}
    for key, rows in zip(DATA_INPUTS, (train_rows, val_rows)):
        path = getattr(cfg.data, key.split(".")[1])
        if rows is not None:
            out[key] = (f"{len(rows)} rows given in memory", _rows_digest(rows))
        elif path:
            out[key] = (str(path), content_digest(path))
    model = cfg.model.name_or_path
    if model:
        local = Path(model).expanduser()
        out[MODEL_INPUT] = (str(model), content_digest(local) if local.is_dir() else f"hub:{model}")
    return out


def _safetensors_problem(path: Path) -> str | None:
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return f"{size} bytes, shorter than a safetensors header"
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            return f"its header claims {n} bytes but the file has {size}"
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError):
            return "its header is not JSON"
    ends = [v["data_offsets"][1] for k, v in header.items()
            if k != "__metadata__" and isinstance(v, dict) and isinstance(v.get("data_offsets"), list)]
    need = 8 + n + max(ends, default=0)
    return f"truncated: {size} bytes of the {need} its header describes" if size < need else None


def _file_problem(path: Path) -> str | None:
    """Why one checkpoint file would not load, or None."""
    name = path.name
    if path.stat().st_size == 0:
        return "empty"
    if name.endswith(".json"):
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            return f"not readable JSON ({e})"
    elif name.endswith(".safetensors"):
        return _safetensors_problem(path)
    elif name.endswith(_TORCH_SUFFIXES):
        with open(path, "rb") as f:
            zipped = f.read(2) == b"PK"
        if zipped:  # torch.save's format; an older pickle-only file is accepted as it is
            try:
                with zipfile.ZipFile(path) as z:
                    z.namelist()
            except (zipfile.BadZipFile, OSError) as e:
                return f"a truncated torch archive ({e})"
    return None


def verify_checkpoint(folder: str | Path) -> list[str]:
    """``file: problem`` for each file of the checkpoint `folder` that would not load (see the module
    docstring); empty when every file passes."""
    out = []
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and not path.name.startswith("."):
            problem = _file_problem(path)
            if problem:
                out.append(f"{path}: {problem}")
    return out


def last_complete_checkpoint(folder: str | Path, markers: tuple[str, ...]) -> str | None:
    """The newest checkpoint-N in `folder` that holds every marker file and whose files pass
    `verify_checkpoint`; each newer one skipped is named in a warning with its damaged files."""
    p = Path(folder)
    if not p.is_dir():
        return None
    found = []
    for child in p.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", child.name)
        if m and child.is_dir() and all((child / name).is_file() for name in markers):
            found.append((int(m.group(1)), child))
    for _, child in sorted(found, reverse=True):
        problems = verify_checkpoint(child)
        if not problems:
            return str(child)
        shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
        logger.warning("checkpoint %s is damaged (%s); resuming from an earlier one instead", child, shown)
    return None
