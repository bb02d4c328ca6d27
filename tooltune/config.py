"""The one configuration mechanism: dataclasses whose fields carry their help once.

Every configurable thing (a training run, the quickstart, evaluation controls, sampling, a backend)
is a dataclass whose fields are declared with `option(default, help, choices)`. From that single
declaration come
- YAML presets: `load(cls, "configs/x.yaml")` (unknown keys and bad types are errors naming the key);
- overrides with one syntax everywhere: `--section.key value` (or `--key value` for flat configs),
  given as a dict `{"grpo.lr": 1e-4}` or as the command-line token list;
- command-line flags: `add_arguments(parser, cls)` adds one flag per field, with the field's help,
  default and choices, and `given_overrides(args)` returns the ones the user actually typed;
- reference docs: `describe(cls)` lists (key, default, help) for every field.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")

_DEST_PREFIX = "cfg:"
"""argparse destination prefix marking a flag generated from a config field."""


class ConfigError(ValueError):
    """A configuration key has a bad name, type or value; the message names the key."""


def option(default: Any, help: str, choices: Sequence[Any] | None = None) -> Any:
    """A dataclass field with its help text (and allowed values) declared once."""
    meta: dict[str, Any] = {"help": help}
    if choices:
        meta["choices"] = tuple(choices)
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda d=default: json.loads(json.dumps(d)), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def section(cls: type, help: str) -> Any:
    """A nested dataclass field (a `section:` in YAML, `--section.key` on the command line)."""
    return dataclasses.field(default_factory=cls, metadata={"help": help})


# ------------------------------------------------------------------------------------ values


def _coerce(key: str, value: Any, typ: Any) -> Any:
    """Convert a YAML / command-line value to the field's type or raise naming the key."""
    origin = typing.get_origin(typ)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        typ = args[0]
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if typ in (int, float):
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        try:
            if isinstance(value, str):
                out = typ(float(value)) if typ is int else float(value)
            else:
                out = typ(value)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{key}: expected {typ.__name__}, got {value!r}") from None
        if typ is int and float(value) != out:
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return out
    if typ is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{key}: expected a string, got {type(value).__name__}")
        return "" if value is None else str(value)
    if typ in (dict, list) or typing.get_origin(typ) in (dict, list):
        want = dict if typ is dict or typing.get_origin(typ) is dict else list
        if isinstance(value, str):
            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError:
                raise ConfigError(f"{key}: could not parse {value!r} as YAML {want.__name__}") from None
        if want is list and isinstance(value, str):
            value = [value]
        if value is None:
            value = want()
        if not isinstance(value, want):
            raise ConfigError(f"{key}: expected a {want.__name__}, got {value!r}")
        return value
    return value


def _hints(obj: Any) -> dict[str, Any]:
    return typing.get_type_hints(type(obj))


def apply(obj: Any, data: Any, prefix: str = "") -> None:
    """Set the fields of dataclass `obj` from a (nested) mapping, converting and checking each value."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    hints = _hints(obj)
    names = [f.name for f in dataclasses.fields(obj)]
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"{full}: unknown key; allowed keys: {', '.join(names)}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            apply(current, value or {}, full + ".")
        else:
            setattr(obj, key, _coerce(full, value, hints[key]))


def _is_bool_key(cfg: Any, dotted: str) -> bool:
    obj: Any = cfg
    for part in dotted.split("."):
        if not dataclasses.is_dataclass(obj) or part not in {f.name for f in dataclasses.fields(obj)}:
            return False
        parent, obj = obj, getattr(obj, part)
    return _hints(parent)[dotted.split(".")[-1]] is bool


def set_key(cfg: Any, dotted: str, value: Any) -> None:
    """Set one dotted key (e.g. "grpo.temperature"), converting the value to the field type.

    `no_<key>` set to true (the `--no-<key>` token) sets the bool `<key>` to false."""
    if dotted.startswith("no_") and not _is_bool_key(cfg, dotted) and _is_bool_key(cfg, dotted[3:]):
        if _coerce(dotted, value, bool):
            set_key(cfg, dotted[3:], False)
            return
        raise ConfigError(f"{dotted}: takes no value (it sets {dotted[3:]} to false)")
    parts = dotted.split(".")
    obj: Any = cfg
    for depth, part in enumerate(parts):
        names = [f.name for f in dataclasses.fields(obj)]
        here = ".".join(parts[: depth + 1])
        if part not in names:
            raise ConfigError(f"{here}: unknown key; allowed keys: {', '.join(names)}")
        if depth == len(parts) - 1:
            if dataclasses.is_dataclass(getattr(obj, part)):
                raise ConfigError(f"{here}: is a section; set one of its keys, e.g. {here}.<key>")
            setattr(obj, part, _coerce(dotted, value, _hints(obj)[part]))
        else:
            obj = getattr(obj, part)
            if not dataclasses.is_dataclass(obj):
                raise ConfigError(f"{here}: is not a section")


def check_choices(obj: Any, prefix: str = "") -> None:
    """Raise ConfigError naming the first field whose value is not among its declared choices."""
    for f in dataclasses.fields(obj):
        val = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(val):
            check_choices(val, key + ".")
        elif "choices" in f.metadata and val not in f.metadata["choices"]:
            raise ConfigError(
                f"{key}: {val!r} is not allowed; choose one of {', '.join(map(str, f.metadata['choices']))}"
            )


def parse_overrides(overrides: dict[str, Any] | Sequence[str] | None) -> dict[str, Any]:
    """`{"a.b": v}` as is, or command-line tokens `--a.b v`, `--a.b=v`, `--flag` (= true) as a dict.

    `--no-a.b` becomes `no_a.b: true`, which `set_key` reads as `a.b: false` for a bool key."""
    if not overrides:
        return {}
    if isinstance(overrides, dict):
        return dict(overrides)
    out: dict[str, Any] = {}
    tokens = list(overrides)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--"):
            raise ConfigError(f"override {tok!r}: expected --key value")
        key = tok[2:]
        if "=" in key:
            key, value = key.split("=", 1)
            i += 1
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
            i += 2
        else:
            value, i = "true", i + 1
        out[key.replace("-", "_")] = value
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config: file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"config: {p} is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config: {p} must hold a mapping of keys, got {type(data).__name__}")
    return data


def load(
    cls: type[T],
    path: str | Path | None = None,
    overrides: dict[str, Any] | Sequence[str] | None = None,
    base: dict[str, Any] | None = None,
) -> T:
    """`cls()` updated from `base`, then the YAML file at `path`, then the dotted `overrides`.

    Choices are checked; a `validate()` method of `cls`, if any, is called and its result returned."""
    cfg = cls()
    if base:
        apply(cfg, base)
    if path:
        apply(cfg, read_yaml(path))
    for key, value in parse_overrides(overrides).items():
        set_key(cfg, key, value)
    check_choices(cfg)
    validate = getattr(cfg, "validate", None)
    return validate() if callable(validate) else cfg


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def dump(cfg: Any, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")


def describe(cls: type, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, default, help) for every field: the single source of CLI and doc help text."""
    return _describe(cls(), prefix)


def _describe(inst: Any, prefix: str) -> list[tuple[str, str, str]]:
    rows = []
    for f in dataclasses.fields(inst):
        val = getattr(inst, f.name)
        if dataclasses.is_dataclass(val):
            rows.extend(_describe(val, f"{prefix}{f.name}."))
        else:
            help_ = f.metadata.get("help", "")
            if "choices" in f.metadata:
                help_ += f" Choices: {', '.join(map(str, f.metadata['choices']))}."
            rows.append((f"{prefix}{f.name}", json.dumps(val), help_))
    return rows


# ------------------------------------------------------------------------------------ command line


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
        kwargs: dict[str, Any] = {
            "dest": dest,
            "default": argparse.SUPPRESS,
            "metavar": _metavar(hints[f.name]),
            "help": f"{help_} (default: {default})".replace("%", "%%"),
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
