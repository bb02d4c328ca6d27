"""Command-line flags generated from a config dataclass (`add_arguments`) and the ones the user typed
(`given_overrides`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Sequence
from typing import Any

_DEST_PREFIX = "cfg:"
"""argparse destination prefix marking a flag generated from a config field."""

def add_arguments(
    parser: argparse.ArgumentParser | Any,
    cls: type,
    prefix: str = "",
    exclude: Sequence[str] = (),
    title: str | None = None,
    *,
    only: Sequence[str] | None = None,
    flag_prefix: str = "",
    group: str = "",
) -> None:
    """One `--<prefix><key>` flag per field of `cls` (nested sections give `--section.key`).

    Help, default and choices come from the field metadata. Values are kept as typed text and
    converted by `load`/`set_key`, so a flag and the same key in YAML behave alike; a flag the user
    did not give is absent from `given_overrides`. A key with `_` also answers to its `-` spelling
    (`--max-new-tokens`). A bool field takes `--key` (true), `--key true|false` and `--no-key`.

    exclude / only: field names (or dotted keys) that get no flag / the only ones that get one.
    flag_prefix: text put before every flag name but not into the key (`user-` gives `--user-endpoint`
    for the key `endpoint`), so one config class can serve two roles on one command line.
    group: keeps these flags' values apart from other configs on the same parser; read them back
    with `given_overrides(args, group)`.
    """
    target = parser.add_argument_group(title) if title else parser
    _add_fields(target, cls(), prefix, exclude, only, flag_prefix, group)


def _add_fields(
    target: Any,
    inst: Any,
    prefix: str,
    exclude: Sequence[str],
    only: Sequence[str] | None,
    flag_prefix: str,
    group: str,
) -> None:
    hints = typing.get_type_hints(type(inst))
    for f in dataclasses.fields(inst):
        key = f"{prefix}{f.name}"
        if key in exclude or f.name in exclude or (only is not None and key not in only
                                                   and f.name not in only):
            continue
        val = getattr(inst, f.name)
        if dataclasses.is_dataclass(val):
            _add_fields(target, val, key + ".", exclude, None, flag_prefix, group)
            continue
        help_ = f.metadata.get("help", "")
        default = json.dumps(val) if isinstance(val, (dict, list, bool)) or val in (None, "") else val
        is_bool = hints[f.name] is bool or isinstance(val, bool)
        dest = f"{_DEST_PREFIX}{group}:{key}" if group else _DEST_PREFIX + key
        name = flag_prefix + key
        dashed = name.replace("_", "-")
        shown = f"default: {default}" + (f"; must be {f.metadata['range']}" if "range" in f.metadata else "")
        kwargs: dict[str, Any] = {
            "dest": dest,
            "default": argparse.SUPPRESS,
            "metavar": _metavar(hints[f.name]),
            "help": f"{help_} ({shown})".replace("%", "%%"),
        }
        if "choices" in f.metadata:
            kwargs["choices"] = [str(c) for c in f.metadata["choices"]]
            kwargs.pop("metavar")
        if is_bool:
            kwargs.update(nargs="?", const="true", metavar="true|false")
            if val is True and not f.name.startswith("no_"):
                kwargs["help"] = f"{help_} (default: true; --no-{dashed} turns it off)".replace("%", "%%")
        flags = [f"--{dashed}"] + ([f"--{name}"] if dashed != name else [])
        target.add_argument(*flags, **kwargs)
        if is_bool and not f.name.startswith("no_"):
            negated = [f"--no-{dashed}"] + ([f"--no-{name}"] if dashed != name else [])
            target.add_argument(*negated, dest=dest, action="store_const", const="false",
                                default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _metavar(typ: Any) -> str:
    """INT, FLOAT, TEXT, YAML (a dict or list written in YAML/JSON) for a field's type."""
    args = [a for a in typing.get_args(typ) if a is not type(None)]
    if typing.get_origin(typ) in (typing.Union, types.UnionType) and args:
        typ = args[0]
    if typ is int:
        return "INT"
    if typ is float:
        return "FLOAT"
    if typ in (dict, list) or typing.get_origin(typ) in (dict, list):
        return "YAML"
    return "TEXT"


def given_overrides(args: argparse.Namespace, group: str = "") -> dict[str, Any]:
    """The config flags of `group` the user gave on the command line, as dotted keys (for `load`)."""
    head = f"{_DEST_PREFIX}{group}:" if group else _DEST_PREFIX
    return {k[len(head):]: v for k, v in vars(args).items()
            if k.startswith(head) and (group or ":" not in k[len(head):])}
