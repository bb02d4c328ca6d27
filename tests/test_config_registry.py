"""The one registry shape: add, decorator, one error for unknown names, lazy loading."""

from __future__ import annotations

import pytest

from tooltune.config import ConfigError, Registry, UnknownName


class Thing:
    name = "alpha"


def test_add_get_and_order() -> None:
    reg: Registry[int] = Registry("number", key="run.number")
    reg.add("one", 1)
    reg.add("two", 2)
    assert reg["one"] == 1 and reg.get("two") == 2
    assert reg.names() == ("one", "two") and list(reg) == ["one", "two"] and len(reg) == 2
    assert "one" in reg and "three" not in reg
    assert reg.get("three", 3) == 3


def test_unknown_name_is_one_error_with_the_closest_names() -> None:
    reg: Registry[int] = Registry("template", key="data.template")
    reg.add("tool_n1", 1)
    reg.add("r2if", 2)
    with pytest.raises(UnknownName) as err:
        reg["tool_n2"]
    msg = str(err.value)
    assert msg == (
        "data.template: unknown template 'tool_n2' (did you mean tool_n1?); registered: r2if, tool_n1"
    )
    assert isinstance(err.value, ConfigError) and isinstance(err.value, ValueError)
    assert isinstance(err.value, KeyError)
    with pytest.raises(UnknownName, match=r"^train\.x: unknown template 'zzz'; registered"):
        reg.get("zzz", key="train.x")


def test_duplicate_registration_is_refused_unless_replace() -> None:
    reg: Registry[object] = Registry("thing")
    a, b = object(), object()
    reg.add("a", a)
    reg.add("a", a)  # the same thing again
    with pytest.raises(ValueError, match="thing 'a' is already registered"):
        reg.add("a", b)
    reg.add("a", b, replace=True)
    assert reg["a"] is b


def test_decorator_uses_the_name_attribute() -> None:
    reg: Registry[type] = Registry("thing")
    assert reg.register(Thing) is Thing
    assert reg["alpha"] is Thing


def test_loader_runs_once_before_the_first_lookup() -> None:
    calls: list[int] = []
    reg: Registry[int] = Registry("benchmark", loader=lambda: (calls.append(1), reg.add("bfcl", 7)))
    assert calls == []
    assert reg["bfcl"] == 7 and "bfcl" in reg and reg.names() == ("bfcl",)
    assert calls == [1]
