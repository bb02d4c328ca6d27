"""Config fields: `option` and `section` declare a field's help, choices and range once; the
errors every command reports as a user mistake (`UserError`, `ConfigError`)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Any


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
