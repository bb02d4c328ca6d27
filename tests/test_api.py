"""The public API re-exported at `tooltune`: every name resolves, and importing the package stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tooltune


@pytest.mark.parametrize("name", [n for n in tooltune.__all__ if n != "__version__"])
def test_every_public_name_resolves_to_the_library_object(name):
    obj = getattr(tooltune, name)
    module = tooltune._API[name]
    assert obj is getattr(__import__(module, fromlist=[name]), name)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tooltune.nope  # noqa: B018


def test_import_tooltune_loads_no_heavy_library():
    heavy = "('torch', 'transformers', 'trl')"
    code = f"import sys, tooltune; print(','.join(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_readme_example_runs_through_the_api():
    text = ('<think>Paris weather.</think>\n<tool_call>\n[{"name": "get_weather", "arguments": '
            '{"city": "Paris"}}]\n</tool_call>')
    gold = [tooltune.ToolCall("get_weather", {"city": "Paris"})]
    assert tooltune.binary_reward(text, gold) == 1.0
    assert tooltune.parse_completion(text).calls == gold
    assert tooltune.exact_match("<think>a</think>" + text, gold) == 0.0
