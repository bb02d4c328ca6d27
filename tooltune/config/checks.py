"""Checks of values that name things in a registry or on disk, done before any work starts: closest
names for a typo, prompt text that is a mistyped name, input files, model paths, output paths."""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Collection
from pathlib import Path
from typing import Any

from tooltune.config.fields import ConfigError


def closest(name: Any, names: Collection[Any], n: int = 3) -> list[str]:
    """The registered names that look most like `name` (a likely typo), best first."""
    return difflib.get_close_matches(str(name), [str(x) for x in names], n=n, cutoff=0.6)


def did_you_mean(name: Any, names: Collection[Any]) -> str:
    near = closest(name, names)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def unknown_name(key: str, what: str, name: Any, known: Collection[Any]) -> ConfigError:
    """The error for a name that is not registered: it names `key`, suggests the closest names and
    lists the known ones ("data.template: unknown template 'tool_n2' (did you mean tool_n1?); registered:
    ...")."""
    return ConfigError(
        f"{key}: unknown {what} {name!r}{did_you_mean(name, known)}; "
        f"registered: {', '.join(sorted(map(str, known)))}"
    )


_NAME_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def check_prompt_text(key: str, value: str | None, names: Collection[str], what: str = "template") -> None:
    """Refuse a prompt-text value that looks like a mistyped name instead of being used as the text.

    `value` may be text (anything with a space, a placeholder such as {tools}, punctuation), an existing
    file, or a name among `names`; a single identifier-like word that is neither a name nor a file is
    an error naming `key` and the closest names."""
    if not value or value in names or not _NAME_LIKE.fullmatch(value) or Path(value).is_file():
        return
    raise ConfigError(
        f"{key}: {value!r} is not a {what} name{did_you_mean(value, names)}, nor a file, and a single "
        f"word is not a prompt; give a registered {what} ({', '.join(sorted(names))}), prompt text or a file"
    )


def require_file(key: str, path: str | os.PathLike) -> Path:
    """`path` as a Path if it is an existing file; otherwise a ConfigError naming `key` and the path."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise ConfigError(f"{key}: {path} is a folder, not a file")
    if not p.is_file():
        raise ConfigError(f"{key}: file not found: {path}")
    return p


def looks_local(spec: str) -> bool:
    """True when a model spec can only be a local path, not a hub id (`org/name` or `name`): it starts
    with '.', '/' or '~', uses the OS's own separator, or has more than one '/'."""
    seps = {s for s in (os.sep, os.altsep) if s and s != "/"}
    return spec.startswith((".", "/", "~")) or any(s in spec for s in seps) or spec.count("/") > 1


def check_model_path(key: str, spec: str) -> None:
    """Refuse a model spec that is a local path (an existing one, or one that cannot be a hub id) but not
    an existing folder; hub ids are left to the loader."""
    if not spec:
        return
    p = Path(spec).expanduser()
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{key}: {spec} is a file; a model is a folder (config.json, weights, tokenizer)")
    if not p.exists() and looks_local(spec):
        raise ConfigError(f"{key}: model folder not found: {spec} (a hub id looks like org/name)")


def _blocking_file(folder: Path) -> Path | None:
    """The nearest existing ancestor of `folder` (itself included) when it is not a folder."""
    for p in (folder, *folder.parents):
        if p.exists():
            return None if p.is_dir() else p
    return None


def prepare_output(path: str | os.PathLike, key: str = "--out", *, folder: bool = False) -> Path:
    """Make an output path ready before any work starts and return it.

    Creates the missing parent folders (and, with `folder`, the folder itself) and checks that a file
    can be created there. A ConfigError names `key` and the path when a parent is a file, the path is
    a folder where a file is wanted (or the reverse), or the place is not writable."""
    p = Path(path).expanduser()
    where = f"{key} {path}"
    if folder and p.exists() and not p.is_dir():
        raise ConfigError(f"{where}: is a file, not a folder")
    if not folder and p.is_dir():
        raise ConfigError(f"{where}: is a folder; give a file name")
    parent = p if folder else p.parent
    blocker = _blocking_file(parent)
    if blocker is not None:
        raise ConfigError(f"{where}: {blocker} is a file, not a folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as e:
        raise ConfigError(f"{where}: cannot write there ({e.strerror or e})") from None
    if not folder and p.exists() and not os.access(p, os.W_OK):
        raise ConfigError(f"{where}: cannot write there (the file is read-only)")
    return p
