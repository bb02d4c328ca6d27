"""`PromptControls`: the four prompt settings declared once, resolved once, inherited by the evaluation
controls and the training data section, and taken by every renderer."""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import textwrap
from pathlib import Path

import pytest

from tooltune import config as config_mechanism
from tooltune.config import ConfigError
from tooltune.evaluation.controls import Controls
from tooltune.prompts import (
    TEMPLATES,
    PromptControls,
    ResolvedPrompt,
    get_template,
    grammar_for,
    render_prompt,
)
from tooltune.schema import Sample
from tooltune.training.config import DataConfig, load_config

PROMPT_FIELDS = ["template", "system_prompt", "history", "keep_reasoning"]
SAMPLE = Sample(
    id="s", source="unit", category="multi_step",
    tools=[{"name": "f", "description": "F.", "parameters": {"type": "object", "properties": {}}}],
    answer=[],
    messages=[{"role": "user", "content": "first"},
              {"role": "assistant", "content": "", "reasoning": "why f",
               "tool_calls": [{"name": "f", "arguments": {}}]},
              {"role": "tool", "name": "f", "content": "{}"},
              {"role": "user", "content": "second"}],
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_resolve_gives_the_template_grammar_system_text_and_digest(tmp_path: Path):
    resolved = PromptControls(template="r2if", system_prompt="bfcl_strong", history="context").resolve()
    assert isinstance(resolved, ResolvedPrompt) and resolved.template is TEMPLATES["r2if"]
    assert resolved.grammar is grammar_for("r2if") and resolved.history == "context"
    assert resolved.system == TEMPLATES["bfcl_strong"].system
    assert resolved.system_sha256() == _sha(TEMPLATES["bfcl_strong"].system)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("From a file: {tools}")
    assert PromptControls(system_prompt=str(prompt)).system_text() == "From a file: {tools}"
    for own in (None, ""):  # none and empty both keep the template's own
        c = PromptControls(template="tool_n1", system_prompt=own)
        assert c.system_text() is None and c.resolve().system == TEMPLATES["tool_n1"].system
        assert c.system_sha256("+x") == _sha(TEMPLATES["tool_n1"].system + "+x")
    extra = PromptControls(system_prompt="Base {tools}").resolve(" Also this.")
    assert extra.system_prompt == "Base {tools} Also this."
    default = PromptControls()
    assert default.prompt_template is TEMPLATES["tool_n1"] and default.grammar.name == "tool_n1"


def test_render_prompt_takes_controls_or_its_keyword_form():
    controls = PromptControls(template="tool_n1", system_prompt="Tools: {tools}", history="context",
                              keep_reasoning=False)
    by_controls = render_prompt(SAMPLE, controls)
    assert by_controls == render_prompt(SAMPLE, controls.resolve())
    assert by_controls == render_prompt(SAMPLE, "tool_n1", history="context", keep_reasoning=False,
                                        system_prompt="Tools: {tools}")
    assert by_controls[0]["content"].startswith("Tools: ") and "why f" not in str(by_controls)
    assert "why f" in str(render_prompt(SAMPLE, PromptControls(history="context")))
    with pytest.raises(TypeError, match="inside the PromptControls"):
        render_prompt(SAMPLE, controls, history="messages")


def test_check_names_the_setting_the_user_gave(tmp_path: Path):
    dashed = lambda name: "--" + name.replace("_", "-")  # noqa: E731
    with pytest.raises(ConfigError, match=r"^--template: unknown template 'tool_n2' \(did you mean tool_n1"):
        PromptControls(template="tool_n2").check(dashed)
    with pytest.raises(ConfigError, match=r"^data\.system_prompt: 'bfcl_strng' is not a template name"):
        PromptControls(system_prompt="bfcl_strng").check(lambda name: f"data.{name}")
    with pytest.raises(ConfigError, match="^history: 'inline' is not allowed"):
        PromptControls(history="inline").validate()
    binary = tmp_path / "prompt.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="^system_prompt: cannot read"):
        PromptControls(system_prompt=str(binary)).validate()
    long_line = "Answer with calls only. " + "x" * 400  # not a file name the file system could hold
    assert PromptControls(system_prompt=long_line).system_text() == long_line


def test_a_module_function_spec_registers_its_template_once(tmp_path: Path, monkeypatch):
    (tmp_path / "my_prompts_for_test.py").write_text(textwrap.dedent('''
        from tooltune.prompts import register_template
        CALLS = []
        def register():
            CALLS.append(1)
            register_template("my_spec_template", "Mine: {tools}", "tool_n1")
            return "my_spec_template"
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = "my_prompts_for_test:register"
    controls = PromptControls(template=spec)
    controls.validate()
    assert controls.resolve().template is TEMPLATES["my_spec_template"]
    assert controls.resolve().name == spec  # another process can load it again
    assert get_template(spec) is TEMPLATES["my_spec_template"] and grammar_for(spec).name == "tool_n1"
    assert render_prompt(SAMPLE, spec)[0]["content"].startswith("Mine: ")
    assert sys.modules["my_prompts_for_test"].CALLS == [1]
    with pytest.raises(ConfigError, match="data.template: cannot load 'no_such_module_x:f'"):
        PromptControls(template="no_such_module_x:f").check(lambda name: f"data.{name}")


@pytest.mark.parametrize("cls", [Controls, DataConfig])
def test_controls_and_data_config_inherit_the_fields_declared_once(cls):
    assert issubclass(cls, PromptControls)
    own = {f.name: f for f in dataclasses.fields(PromptControls)}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in PROMPT_FIELDS:
        assert fields[name].metadata is own[name].metadata  # one declaration, one help text
        assert fields[name].default == own[name].default
    described = {key: help_ for key, _, help_ in config_mechanism.describe(cls)}
    assert described["history"].startswith(own["history"].metadata["help"])


def test_inherited_fields_keep_flat_keys_flags_and_yaml(tmp_path: Path, repo_root: Path):
    cfg = load_config(None, ["--data.template", "r2if", "--data.history", "context",
                             "--no-data.keep_reasoning", "--data.system_prompt", "bfcl_strong"])
    assert (cfg.data.template, cfg.data.history, cfg.data.keep_reasoning) == ("r2if", "context", False)
    assert cfg.data.system_prompt == "bfcl_strong" and cfg.to_dict()["data"]["template"] == "r2if"
    preset = tmp_path / "p.yaml"
    preset.write_text("data:\n  template: toolrl\n  keep_reasoning: false\n  train: t.jsonl\n"
                      "reward:\n  components: {toolrl_format: 1, toolrl_correctness: 1}\n")
    loaded = load_config(preset)
    d = loaded.data
    assert (d.template, d.keep_reasoning, d.train) == ("toolrl", False, "t.jsonl")
    with pytest.raises(ConfigError, match="^data.history: 'inline' is not allowed"):
        load_config(None, {"data.history": "inline"})
    with pytest.raises(ConfigError, match="^data.history: 'native' is not allowed.*choose one of messages"):
        load_config(None, {"data.history": "native"})  # the name of a template, not of a history mode
    with pytest.raises(ConfigError, match="^history: 'native' is a template .* use 'messages'"):
        PromptControls(history="native").check()
    for path in sorted((repo_root / "configs").glob("*.yaml")):  # every preset of a training config
        data = config_mechanism.read_yaml(path)
        if "data" in data:
            assert load_config(path).data.template == data["data"].get("template", "tool_n1"), path
    flags = ["--template", "bfcl", "--keep-reasoning", "false"]
    eval_controls = config_mechanism.load(Controls, overrides=flags)
    assert (eval_controls.template, eval_controls.keep_reasoning) == ("bfcl", False)


def test_with_template_hands_on_a_resolved_template_and_keeps_the_settings():
    """A template value resolved for one model travels with the controls; the settings (flags, YAML, what
    runs record) keep its name."""
    from tooltune.prompts import resolve_native

    controls = PromptControls(template="native", history="context")
    served = resolve_native(None, "native")
    held = controls.with_template(served)
    assert held.prompt_template is served and held.resolve().template is served
    assert held.grammar.name == "hermes" and held == controls and held.template == "native"
    assert dataclasses.asdict(held) == dataclasses.asdict(controls)
    assert controls.prompt_template is TEMPLATES["native"]  # the original is unchanged
    with pytest.raises(ValueError, match="is not the template"):
        controls.with_template(TEMPLATES["tool_n1"])
