"""The one configuration mechanism: dataclasses whose fields carry their help once.

Every configurable thing (a training run, the quickstart, evaluation controls, sampling, a backend)
is a dataclass whose fields are declared with `option(default, help, choices, min=..., max=...)`.
From that single declaration come
- YAML presets: `load(cls, "configs/x.yaml")` (unknown keys, bad types, values outside the declared
  choices or range are errors naming the key);
- overrides with one syntax everywhere: `--section.key value` (or `--key value` for flat configs),
  given as a dict `{"grpo.lr": 1e-4}` or as the command-line token list;
- command-line flags: `add_arguments(parser, cls)` adds one flag per field, with the field's help,
  default and choices, and `given_overrides(args)` returns the ones the user actually typed;
- reference docs: `describe(cls)` lists (key, default, help) for every field.

Also here, for every command: `UserError`, the base of the errors that mean "the user gave something
wrong" (the command line prints their message on one line and exits with status 2), and the checks
of values that name things on disk or in a registry (`prepare_output`, `require_file`,
`check_model_path`, `unknown_name`, `check_prompt_text`), so that a command refuses them before any
work starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import os
import re
import tempfile
import types
import typing
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")

_DEST_PREFIX = "cfg:"
"""argparse destination prefix marking a flag generated from a config field."""


class UserError(Exception):
    """Something the user gave (a flag, a configuration key, a file, a path) is wrong.

    The message names what is wrong; `tooltune` prints it on one line and exits with status 2, without
    a traceback. Errors of other layers that mean the same subclass it or are listed in
    `tooltune.cli.USER_ERRORS`."""


class ConfigError(UserError, ValueError):
    """A configuration key has a bad name, type or value; the message names the key."""


@dataclasses.dataclass(frozen=True)
class Range:
    """The numbers a field allows: bounds, each inclusive or exclusive, plus `also`, single values
    allowed outside them (a sentinel such as -1 for "not set"). NaN is never in a range."""

    low: float | None = None
    high: float | None = None
    low_exclusive: bool = False
    high_exclusive: bool = False
    also: tuple[float, ...] = ()

    def __contains__(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if value in self.also:
            return True
        if math.isnan(value):
            return False
        if self.low is not None and (value <= self.low if self.low_exclusive else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_exclusive else value <= self.high)

    def __str__(self) -> str:
        """">= 1", "> 0", "in [0, 1)", "-1 or >= 1"."""
        low, high = self.low, self.high
        if low is not None and high is not None:
            text = (f"in {'(' if self.low_exclusive else '['}{_num(low)}, "
                    f"{_num(high)}{')' if self.high_exclusive else ']'}")
        elif low is not None:
            text = f"{'>' if self.low_exclusive else '>='} {_num(low)}"
        elif high is not None:
            text = f"{'<' if self.high_exclusive else '<='} {_num(high)}"
        else:
            text = "a number"
        return " or ".join([*map(_num, self.also), text])


def _num(x: float) -> str:
    return f"{x:g}"


def option(
    default: Any,
    help: str,
    choices: Sequence[Any] | None = None,
    *,
    min: float | None = None,
    max: float | None = None,
    min_exclusive: float | None = None,
    max_exclusive: float | None = None,
    also: Sequence[float] = (),
) -> Any:
    """A dataclass field with its help text and allowed values declared once.

    choices: the allowed values. min / max: inclusive bounds of a number; min_exclusive /
    max_exclusive: exclusive ones (`min_exclusive=0` is "> 0"); also: values allowed outside the
    bounds (`min=1, also=(-1,)` is "-1 or >= 1"). None is always allowed for an optional field.
    `load` checks them, `add_arguments` and `describe` show them.
    """
    meta: dict[str, Any] = {"help": help}
    if choices:
        meta["choices"] = tuple(choices)
    if min is not None and min_exclusive is not None or max is not None and max_exclusive is not None:
        raise TypeError("option: give min or min_exclusive (max or max_exclusive), not both")
    if (min, max, min_exclusive, max_exclusive) != (None,) * 4:
        meta["range"] = Range(
            low=min if min is not None else min_exclusive,
            high=max if max is not None else max_exclusive,
            low_exclusive=min_exclusive is not None,
            high_exclusive=max_exclusive is not None,
            also=tuple(also),
        )
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
    return ConfigError(f"{key}: unknown key{_did_you_mean(name, names)}; allowed keys: {', '.join(names)}")


def check_value(
    key: str, value: Any, choices: Sequence[Any] | None = None, allowed: Range | None = None
) -> None:
    """Raise ConfigError naming `key`, the value and what is allowed when `value` is outside `choices`
    or the range `allowed` (None passes: an optional field that is not set)."""
    if value is None:
        return
    if choices is not None and value not in choices:
        raise ConfigError(
            f"{key}: {value!r} is not allowed{_did_you_mean(value, choices)}; "
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


# ------------------------------------------------------------------------------------ names and paths


def closest(name: Any, names: Collection[Any], n: int = 3) -> list[str]:
    """The registered names that look most like `name` (a likely typo), best first."""
    return difflib.get_close_matches(str(name), [str(x) for x in names], n=n, cutoff=0.6)


def _did_you_mean(name: Any, names: Collection[Any]) -> str:
    near = closest(name, names)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def unknown_name(key: str, what: str, name: Any, known: Collection[Any]) -> ConfigError:
    """The error for a name that is not registered: it names `key`, suggests the closest names and
    lists the known ones ("data.template: unknown template 'tool_n2' (did you mean tool_n1?); registered:
    ...")."""
    return ConfigError(
        f"{key}: unknown {what} {name!r}{_did_you_mean(name, known)}; "
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
        f"{key}: {value!r} is not a {what} name{_did_you_mean(value, names)}, nor a file, and a single "
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
