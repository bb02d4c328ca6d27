"""One run per folder, and its inputs by content: `check_identity`, `content_digest`, `check_inputs`
(see the package docstring)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

IDENTITY_NAME = "run.json"
"""The file inside a run folder holding the fields that define its results."""


class RunMismatch(ValueError):
    """The run folder holds results that are not this run's, or this run's without resuming them."""


# --------------------------------------------------------------------------------------------
# One run per folder


_MISSING = object()


def _show(value: Any) -> str:
    return "missing" if value is _MISSING else json.dumps(value, ensure_ascii=False, sort_keys=True)


def differences(stored: Mapping[str, Any], fields: Mapping[str, Any], prefix: str = "",
                defaults: Mapping[str, Any] | None = None, retired: Mapping[str, Any] | None = None
                ) -> list[str]:
    """'key: <stored> vs <fields>' for every key whose values differ; nested mappings give dotted keys.

    `defaults` (shaped like `fields`) holds each setting's default: a key the stored run lacks and that
    `fields` holds at its default is no difference. A setting added to tooltune after a run was made
    reads as missing there, and at its default it changes nothing the run computed. `retired` (the same
    shape) holds settings tooltune no longer records, with the value every run that recorded them was
    made with: a stored key `fields` lacks, at that value, is no difference either."""
    out = []
    defaults = defaults if isinstance(defaults, Mapping) else {}
    retired = retired if isinstance(retired, Mapping) else {}
    for key in list(stored) + [k for k in fields if k not in stored]:
        a, b = stored.get(key, _MISSING), fields.get(key, _MISSING)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += differences(a, b, f"{prefix}{key}.", defaults.get(key), retired.get(key))
        elif _unchanged(a, b, key, defaults, retired):
            continue
        elif a != b:
            out.append(f"{prefix}{key}: {_show(a)} vs {_show(b)}")
    return out


def _unchanged(a: Any, b: Any, key: str, defaults: Mapping[str, Any], retired: Mapping[str, Any]) -> bool:
    """A setting added since the run, at its default, or one retired since, at its old value."""
    added = a is _MISSING and key in defaults and b == defaults[key]
    return added or (b is _MISSING and key in retired and a == retired[key])


def _normalized(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` as they read back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(dict(fields)))


def read_identity(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The fields stored in `folder/run.json`, or None when there is no such file.

    Raises RunMismatch when the file exists but is not a JSON object."""
    path = Path(folder) / IDENTITY_NAME
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RunMismatch(f"{path} cannot be read ({e}): which run {path.parent} holds is unknown; "
                          "write to another output folder") from None
    if not isinstance(stored, dict):
        raise RunMismatch(f"{path} is not a JSON object: which run {path.parent} holds is unknown; "
                          "write to another output folder")
    return stored


def write_identity(folder: str | os.PathLike, fields: Mapping[str, Any]) -> Path:
    """Write `fields` to `folder/run.json` (atomically: a kill leaves the old file or the new one)."""
    path = Path(folder) / IDENTITY_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{IDENTITY_NAME}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_normalized(fields), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def _results(folder: Path) -> list[str]:
    """What `folder` holds besides dot-files and its identity (the results a resume would keep)."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".") and p.name != IDENTITY_NAME)


def check_identity(
    folder: str | os.PathLike, fields: Mapping[str, Any], resume: bool, subset: bool = False,
    defaults: Mapping[str, Any] | None = None, retired: Mapping[str, Any] | None = None,
) -> bool:
    """Whether `folder` holds this run to resume (True) or nothing yet (False); RunMismatch otherwise.

    See the module docstring for the cases; `subset`: compare only the keys of `fields`; `defaults`:
    as for `differences` (settings added since the run was made, at their defaults, are no difference);
    `retired`: as for `differences` (settings no longer recorded, at the value they always had).
    Call it while holding the folder's RunLock (a `subset` check before the work starts may run without
    it)."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    content = _results(folder)
    stored = read_identity(folder)
    if not content:
        return False  # nothing but an identity: no results to keep or to mix with
    if stored is None:
        shown = ", ".join(content[:5]) + (", ..." if len(content) > 5 else "")
        raise RunMismatch(f"{folder} is not empty ({shown}) and has no {IDENTITY_NAME}, so which run "
                          "its files belong to is unknown: write to a new or empty folder")
    if subset:
        stored = {k: v for k, v in stored.items() if k in fields}
    diffs = differences(stored, _normalized(fields), defaults=_normalized(defaults or {}),
                        retired=_normalized(retired or {}))
    if diffs:
        how = ("a run resumes only with the settings it started with: repeat those, or write to another "
               "output folder" if resume else "write to another output folder (or remove this one)")
        plural = "s" if len(diffs) > 1 else ""
        raise RunMismatch(f"{folder} holds another run ({len(diffs)} difference{plural}, the folder's value "
                          f"vs this run's: {'; '.join(diffs)}): {how}")
    if not resume:
        raise RunMismatch(f"{folder} already holds this run's results: pass --resume to continue it, or "
                          "write to another output folder (or remove this one) to start over")
    return True


# --------------------------------------------------------------------------------------------
# Inputs by content

FULL_DIGEST_BYTES = 256 << 20
"""Files up to this size are digested in full; larger ones from `DIGEST_SAMPLES` pieces."""
DIGEST_SAMPLES = 64
_PIECE = 1 << 20


def _file_digest(path: Path) -> tuple[str, bool]:
    """(hex sha256, whether sampled) of one file."""
    h = hashlib.sha256()
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size <= FULL_DIGEST_BYTES:
            for chunk in iter(lambda: f.read(_PIECE), b""):
                h.update(chunk)
            return h.hexdigest(), False
        h.update(str(size).encode())
        piece = min(_PIECE, size)
        for i in range(DIGEST_SAMPLES):
            f.seek((size - piece) * i // (DIGEST_SAMPLES - 1))
            h.update(f.read(piece))
    return h.hexdigest(), True


def content_digest(path: str | os.PathLike) -> str:
    """``sha256:<hex>`` of a file's bytes, or of a folder's files (relative names and contents; names
    starting with a dot are left out); ``sampled-sha256:<hex>`` when a file above `FULL_DIGEST_BYTES`
    was digested from pieces. OSError for a path that cannot be read."""
    p = Path(path)
    if not p.is_dir():
        digest, sampled = _file_digest(p)
        return f"{'sampled-' if sampled else ''}sha256:{digest}"
    h, any_sampled = hashlib.sha256(), False
    for f in sorted(p.rglob("*")):
        rel = f.relative_to(p)
        if f.is_file() and not any(part.startswith(".") for part in rel.parts):
            digest, sampled = _file_digest(f)
            any_sampled |= sampled
            h.update(f"{rel.as_posix()}\0{digest}\n".encode())
    return f"{'sampled-' if any_sampled else ''}sha256:{h.hexdigest()}"


def check_inputs(
    folder: str | os.PathLike, inputs: Mapping[str, tuple[str, str]], key: str = "inputs"
) -> None:
    """Refuse (RunMismatch) to continue the run in `folder` when an input's digest differs from the one
    its `run.json` recorded under `key`. `inputs`: name -> (the file or folder it is, its digest now).
    Names the run did not record are left to `check_identity`; a folder holding no results yet (a run
    that stopped before writing any) has nothing to protect, as for `check_identity`."""
    if not Path(folder).is_dir() or not _results(Path(folder)):
        return
    stored = read_identity(folder) or {}
    recorded = stored.get(key) if isinstance(stored.get(key), Mapping) else {}
    changed = [f"{name} ({where}): {str(recorded[name])[:19]}... when the run started, {digest[:19]}... now"
               for name, (where, digest) in inputs.items() if name in recorded and recorded[name] != digest]
    if changed:
        raise RunMismatch(f"{folder} holds a run whose inputs changed since it started "
                          f"({'; '.join(changed)}): a run resumes only on the files it started with; put "
                          "them back, or start a new run in another output folder")


