"""What a failed command created, and append-only JSONL files that survive a kill:
`removed_on_failure`, `drop_torn_tail` (see the package docstring)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tooltune.rundir.identity import IDENTITY_NAME
from tooltune.rundir.lock import LOCK_NAME, RunFolderBusy, RunLock

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# What a failed command created

_METADATA = (IDENTITY_NAME, "manifest.json")


def _holds_results(folder: Path) -> bool:
    for p in folder.iterdir():
        if p.name.startswith(".") or p.name in _METADATA:
            continue
        if p.is_dir() or p.stat().st_size > 0:
            return True
    return False


def _discard(target: Path, top: Path) -> None:
    """Remove the folder `target` a failed command created, and its parents up to `top`, unless it
    holds results or another writer has it."""
    try:
        with RunLock(target):  # no other writer has started in it meanwhile
            if _holds_results(target):
                logger.warning("%s: kept after the failure: it holds results to resume", target)
                return
            for p in target.iterdir():
                if p.is_dir():
                    shutil.rmtree(p)
                elif p.name != LOCK_NAME:
                    p.unlink()
            (target / LOCK_NAME).unlink(missing_ok=True)  # our descriptor still holds the lock
        target.rmdir()
        for parent in target.parents:  # then the empty parents the command created
            if parent == top.parent or any(parent.iterdir()):
                break
            parent.rmdir()
    except (RunFolderBusy, OSError) as e:
        logger.warning("%s: not removed after the failure (%s)", target, e)


@contextmanager
def removed_on_failure(folder: str | os.PathLike) -> Iterator[None]:
    """Run the block; when it raises and `folder` did not exist before it, remove what it created (see
    the module docstring) and re-raise."""
    target = Path(folder).absolute()
    top = target
    while not top.parent.exists() and top.parent != top:  # the highest folder the block may create
        top = top.parent
    existed = target.exists()
    try:
        yield
    except BaseException:
        if not existed and target.is_dir():
            _discard(target, top)
        raise


# --------------------------------------------------------------------------------------------
# Append-only JSONL files


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def drop_torn_tail(path: str | os.PathLike) -> bool:
    """Make the JSONL file `path` end with a complete line; True when it was changed.

    A last line without its newline is kept (the newline added) when it is complete JSON and cut off
    otherwise; a last line with its newline that is not JSON is cut off too. Earlier lines are not
    read. A missing or empty file is left alone."""
    path = Path(path)
    try:
        f = open(path, "r+b")  # noqa: SIM115 (closed below; a missing file is not an error)
    except FileNotFoundError:
        return False
    with f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return False
        f.seek(size - 1)
        has_newline = f.read(1) == b"\n"
        body_end = size - 1 if has_newline else size
        start, pos, chunk = 0, body_end, 1 << 16
        while pos > 0:  # find the newline before the last line
            lo = max(0, pos - chunk)
            f.seek(lo)
            cut = f.read(pos - lo).rfind(b"\n")
            if cut >= 0:
                start = lo + cut + 1
                break
            pos = lo
        f.seek(start)
        last = f.read(body_end - start)
        if _is_json(last):
            if has_newline:
                return False
            f.seek(size)
            f.write(b"\n")
            logger.warning("%s: added the newline missing after the last line", path)
            return True
        f.truncate(start)
        logger.warning("%s: dropped an unfinished last line (%d bytes)", path, size - start)
        return True
