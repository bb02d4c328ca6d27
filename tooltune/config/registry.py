"""The one shape of every registry in tooltune: names to things, one way to add, one error.

Benchmarks, environments, rewards, reward presets, data sources, grammars, templates: each is a
`Registry`. Adding is `REG.add(name, thing)` (or `@REG.register` on a class with a `name`); looking up
an unknown name raises `UnknownName`, which names the setting, suggests the closest registered names
and lists them all ("data.template: unknown template 'tool_n2' (did you mean tool_n1?); registered:
..."). `UnknownName` is a `ConfigError` (a user error: one line, exit status 2), a `ValueError` and a
`KeyError`, so code written against a plain dict or a ValueError keeps working.

A registry whose entries live in modules that register themselves on import names a `loader`: it is
called once, before the first lookup, so importing the registry stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from tooltune.config.checks import unknown_name
from tooltune.config.fields import ConfigError

T = TypeVar("T")


class UnknownName(ConfigError, KeyError):
    """A name that is not registered; the message names the setting and the closest names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T], Generic[T]):
    """Registered things by name, in registration order."""

    def __init__(self, what: str, key: str = "", loader: Callable[[], Any] | None = None) -> None:
        """`what` names one entry in errors ("benchmark"); `key` is the setting that takes the name
        (default: `what`); `loader` imports the modules that register the entries."""
        self.what = what
        self.key = key or what
        self._loader = loader
        self._loaded = loader is None
        self._items: dict[str, T] = {}

    def add(self, name: str, thing: T, *, replace: bool = False) -> T:
        """Register `thing` as `name`; registering another thing under a taken name is a ValueError
        unless `replace` (the same thing again is a no-op)."""
        held = self._items.get(name)
        if held is not None and held is not thing and not replace:
            raise ValueError(f"{self.what} {name!r} is already registered ({_describe(held)})")
        self._items[name] = thing
        return thing

    def register(self, thing: T) -> T:
        """Decorator form of `add` for things that carry their own `name` attribute."""
        return self.add(thing.name, thing)  # type: ignore[attr-defined]

    def get(self, name: str, default: Any = None, *, key: str = "") -> T:  # type: ignore[override]
        """The thing registered as `name`; `UnknownName` (naming `key`, else the registry's setting)
        when there is none and no `default` is given."""
        self._load()
        if name in self._items:
            return self._items[name]
        if default is not None:
            return default
        raise UnknownName(str(unknown_name(key or self.key, self.what, name, self._items)))

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(self._items)

    def __len__(self) -> int:
        self._load()
        return len(self._items)

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order."""
        return tuple(self)

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True  # before calling: the loader's imports register into this registry
            assert self._loader is not None
            self._loader()

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {len(self._items)} registered)"


def _describe(thing: Any) -> str:
    return getattr(thing, "__qualname__", None) or type(thing).__qualname__
