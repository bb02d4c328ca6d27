"""Values: YAML and dotted overrides applied to a config dataclass, converted to the field types and
checked against the declared choices and ranges; `load`, `dump`, `describe`."""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tooltune.config.checks import did_you_mean
from tooltune.config.fields import ConfigError, Range

T = TypeVar("T")


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
    if isinstance(typ, type) and issubclass(typ, enum.Enum):
        try:
            return typ(value)
        except ValueError:
            return value  # the choices check names the key and the allowed values
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
            raise _unknown_key(full, key, names)
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
            raise _unknown_key(here, part, names)
        if depth == len(parts) - 1:
            if dataclasses.is_dataclass(getattr(obj, part)):
                raise ConfigError(f"{here}: is a section; set one of its keys, e.g. {here}.<key>")
            setattr(obj, part, _coerce(dotted, value, _hints(obj)[part]))
        else:
            obj = getattr(obj, part)
            if not dataclasses.is_dataclass(obj):
                raise ConfigError(f"{here}: is not a section")


def _unknown_key(key: str, name: str, names: Sequence[str]) -> ConfigError:
    return ConfigError(f"{key}: unknown key{did_you_mean(name, names)}; allowed keys: {', '.join(names)}")


def check_value(
    key: str, value: Any, choices: Sequence[Any] | None = None, allowed: Range | None = None
) -> None:
    """Raise ConfigError naming `key`, the value and what is allowed when `value` is outside `choices`
    or the range `allowed` (None passes: an optional field that is not set)."""
    if value is None:
        return
    if choices is not None and value not in choices:
        raise ConfigError(
            f"{key}: {value!r} is not allowed{did_you_mean(value, choices)}; "
            f"choose one of {', '.join(map(str, choices))}"
        )
    if allowed is not None and value not in allowed:
        raise ConfigError(f"{key}: must be {allowed}, got {value!r}")


def check_values(obj: Any, prefix: str = "") -> None:
    """Raise ConfigError naming the first field (dotted key) whose value is outside its declared choices
    or range; nested sections are checked too."""
    for f in dataclasses.fields(obj):
        val = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(val):
            check_values(val, key + ".")
        else:
            check_value(key, val, f.metadata.get("choices"), f.metadata.get("range"))


check_choices = check_values
"""The former name of `check_values` (choices were the only declared constraint)."""


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

    Choices and ranges are checked; the `validate()` method of each section that has one is called
    (its errors get the section's key in front: `train.grpo.temperature`), then that of `cls`, whose
    result is returned."""
    cfg = cls()
    if base:
        apply(cfg, base)
    if path:
        apply(cfg, read_yaml(path))
    for key, value in parse_overrides(overrides).items():
        set_key(cfg, key, value)
    check_values(cfg)
    _validate_sections(cfg)
    validate = getattr(cfg, "validate", None)
    return validate() if callable(validate) else cfg


def _validate_sections(obj: Any, prefix: str = "") -> None:
    for f in dataclasses.fields(obj):
        val = getattr(obj, f.name)
        if not dataclasses.is_dataclass(val):
            continue
        key = f"{prefix}{f.name}."
        _validate_sections(val, key)
        validate = getattr(val, "validate", None)
        if callable(validate):
            try:
                validate()
            except ConfigError as e:
                raise ConfigError(f"{key}{e}") from None


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
            if "range" in f.metadata:
                help_ += f" Must be {f.metadata['range']}."
            rows.append((f"{prefix}{f.name}", json.dumps(val), help_))
    return rows
