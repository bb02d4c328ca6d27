"""The configuration mechanism itself: values declared once with `option` (choices and ranges), checked by
`load` with errors naming the dotted key, shown in help; the checks of names and paths every command uses."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from pathlib import Path

import pytest

from tooltune import config
from tooltune.config import ConfigError, Range, UserError, option, section


@dataclasses.dataclass
class _Inner:
    rate: float = option(0.5, "A share.", min=0, max_exclusive=1)
    steps: int = option(-1, "Steps (-1 = all).", min=1, also=(-1,))


@dataclasses.dataclass
class _Demo:
    lr: float = option(1e-3, "Learning rate.", min_exclusive=0)
    n: int = option(4, "How many.", min=1)
    temperature: float = option(0.7, "Temperature (0 = greedy).", min=0)
    top_p: float = option(1.0, "Nucleus.", min_exclusive=0, max=1)
    limit: int | None = option(None, "Stop after N (none = no limit).", min=0)
    mode: str = option("strict", "Parser mode.", ("strict", "substring"))
    free: float = option(2.0, "No range.")
    inner: _Inner = section(_Inner, "Nested part.")


def test_a_config_error_is_a_user_error_and_a_value_error() -> None:
    assert issubclass(ConfigError, UserError) and issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    ("allowed", "text", "inside", "outside"),
    [
        (Range(low=0, low_exclusive=True), "> 0", [1e-9, 5], [0, -1.0]),
        (Range(low=0), ">= 0", [0, 3], [-0.001]),
        (Range(0, 1, high_exclusive=True), "in [0, 1)", [0, 0.99], [1, 1.5, -0.1]),
        (Range(0, 1, low_exclusive=True), "in (0, 1]", [1, 0.5], [0]),
        (Range(low=1, also=(-1,)), "-1 or >= 1", [-1, 1, 7], [0, -5, -2]),
        (Range(high=10), "<= 10", [10, -3], [11]),
    ],
)
def test_range_membership_and_text(allowed: Range, text: str, inside: list, outside: list) -> None:
    assert str(allowed) == text
    assert all(v in allowed for v in inside), inside
    assert not any(v in allowed for v in outside), outside
    assert math.nan not in allowed and True not in allowed and "1" not in allowed


def test_option_declares_the_range_in_the_field_metadata() -> None:
    fields = {f.name: f for f in dataclasses.fields(_Demo)}
    assert fields["lr"].metadata["range"] == Range(low=0, low_exclusive=True)
    assert fields["top_p"].metadata["range"] == Range(0, 1, low_exclusive=True)
    assert "range" not in fields["free"].metadata
    with pytest.raises(TypeError, match="not both"):
        option(1, "x", min=0, min_exclusive=0)


def test_defaults_are_in_range() -> None:
    config.check_values(_Demo())
    assert config.load(_Demo).inner.steps == -1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"lr": "-1.0"}, r"^lr: must be > 0, got -1.0$"),
        ({"lr": 0}, r"^lr: must be > 0, got 0.0$"),
        ({"lr": "nan"}, r"^lr: must be > 0, got nan$"),
        ({"n": "0"}, r"^n: must be >= 1, got 0$"),
        ({"temperature": "-1"}, r"^temperature: must be >= 0, got -1.0$"),
        ({"top_p": "1.5"}, r"^top_p: must be in \(0, 1\], got 1.5$"),
        ({"limit": "-1"}, r"^limit: must be >= 0, got -1$"),
        ({"inner.rate": "1.5"}, r"^inner.rate: must be in \[0, 1\), got 1.5$"),
        ({"inner.steps": "-5"}, r"^inner.steps: must be -1 or >= 1, got -5$"),
        ({"mode": "strikt"},
         r"^mode: 'strikt' is not allowed \(did you mean strict\?\); choose one of strict"),
        ({"lr": "abc"}, r"^lr: expected float, got 'abc'$"),
        ({"inner.rait": 1}, r"^inner.rait: unknown key \(did you mean rate\?\); allowed keys: rate, steps$"),
    ],
)
def test_load_refuses_values_outside_the_declaration_naming_the_key(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config.load(_Demo, overrides=overrides)


def test_in_range_values_and_none_load() -> None:
    cfg = config.load(_Demo, overrides=["--lr", "1e-5", "--temperature", "0", "--limit", "none",
                                        "--inner.steps", "3", "--inner.rate", "0", "--top_p", "1"])
    assert (cfg.lr, cfg.temperature, cfg.limit, cfg.inner.steps, cfg.inner.rate, cfg.top_p) == (
        1e-5, 0.0, None, 3, 0.0, 1.0)


def test_yaml_values_are_checked_too(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("inner:\n  steps: 0\n")
    with pytest.raises(ConfigError, match=r"inner.steps: must be -1 or >= 1, got 0"):
        config.load(_Demo, path)


def test_check_choices_is_the_same_check() -> None:
    cfg = _Demo()
    cfg.inner.rate = 2.0
    with pytest.raises(ConfigError, match="inner.rate: must be in"):
        config.check_choices(cfg)
    config.check_value("x", None, allowed=Range(low=1))  # an optional field that is not set


def test_help_and_describe_show_the_range() -> None:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, _Demo)
    helps = {s: a.help for a in parser._actions for s in a.option_strings}
    assert helps["--lr"] == "Learning rate. (default: 0.001; must be > 0)"
    assert helps["--inner.steps"] == "Steps (-1 = all). (default: -1; must be -1 or >= 1)"
    assert helps["--free"] == "No range. (default: 2.0)"
    rows = {key: help_ for key, _, help_ in config.describe(_Demo)}
    assert rows["inner.rate"] == "A share. Must be in [0, 1)."
    assert rows["mode"] == "Parser mode. Choices: strict, substring."


# ------------------------------------------------------------------------------------ names


def test_unknown_name_suggests_the_closest() -> None:
    err = config.unknown_name("data.template", "template", "tool_n2", ["tool_n1", "r2if", "bfcl"])
    assert str(err) == ("data.template: unknown template 'tool_n2' (did you mean tool_n1?); "
                        "registered: bfcl, r2if, tool_n1")
    assert "did you mean" not in str(config.unknown_name("k", "template", "zzz", ["tool_n1"]))


def test_prompt_text_refuses_a_mistyped_name_but_takes_text_names_and_files(tmp_path: Path) -> None:
    names = ["tool_n1", "bfcl_strong"]
    with pytest.raises(ConfigError, match=r"--system-prompt: 'bfcl_strng' is not a template name "
                                          r"\(did you mean bfcl_strong\?\)"):
        config.check_prompt_text("--system-prompt", "bfcl_strng", names)
    prompt = tmp_path / "prompt"
    prompt.write_text("Call tools.\n{tools}")
    for ok in ("", None, "bfcl_strong", "You are a helpful assistant.", "Tools: {tools}", "Answer!",
               str(prompt)):
        config.check_prompt_text("--system-prompt", ok, names)


# ------------------------------------------------------------------------------------ paths


def test_require_file(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_text("{}\n")
    assert config.require_file("data.train", f) == f
    with pytest.raises(ConfigError, match=r"^data.train: file not found: .*missing.jsonl$"):
        config.require_file("data.train", tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError, match="is a folder, not a file"):
        config.require_file("data.train", tmp_path)


def test_model_paths_local_or_hub(tmp_path: Path) -> None:
    assert config.looks_local("./m") and config.looks_local("/abs/m") and config.looks_local("~/m")
    assert config.looks_local("runs/q/models/sft")
    assert not config.looks_local("Qwen/Qwen2.5-7B-Instruct") and not config.looks_local("gpt2")
    config.check_model_path("model", "Qwen/Qwen2.5-7B-Instruct")  # left to the loader
    config.check_model_path("model", str(tmp_path))
    config.check_model_path("model", "")
    with pytest.raises(ConfigError, match=r"^model: model folder not found: ./nomodel"):
        config.check_model_path("model", "./nomodel")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file; a model is a folder"):
        config.check_model_path("model", str(tmp_path / "file"))


def test_prepare_output_creates_parents(tmp_path: Path) -> None:
    out = config.prepare_output(tmp_path / "runs" / "data" / "synth.jsonl")
    assert out.parent.is_dir() and not out.exists()
    folder = config.prepare_output(tmp_path / "a" / "b", folder=True)
    assert folder.is_dir() and list(folder.iterdir()) == []
    assert config.prepare_output(folder, folder=True) == folder  # an existing folder is fine


def test_prepare_output_refuses_paths_that_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / "some_file.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"^--out .*/sub: .*some_file.txt is a file, not a folder$"):
        config.prepare_output(tmp_path / "some_file.txt" / "sub")
    with pytest.raises(ConfigError, match=r"^run.output_dir .*: .*some_file.txt is a file, not a folder$"):
        config.prepare_output(tmp_path / "some_file.txt" / "a" / "b", "run.output_dir", folder=True)
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        config.prepare_output(tmp_path / "some_file.txt", folder=True)
    with pytest.raises(ConfigError, match="is a folder; give a file name"):
        config.prepare_output(tmp_path)
    if Path("/proc/self").is_dir():
        with pytest.raises(ConfigError, match=r"^--out /proc/x: cannot write there \("):
            config.prepare_output("/proc/x")
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            with pytest.raises(ConfigError, match="cannot write there"):
                config.prepare_output(ro / "x.jsonl")
        finally:
            ro.chmod(0o755)


@dataclasses.dataclass
class _Checked:
    low: float = option(0.0, "Low.")
    high: float = option(1.0, "High.")

    def validate(self) -> _Checked:
        if not self.low < self.high:
            raise ConfigError(f"low: must be < high ({self.high}), got {self.low}")
        return self


@dataclasses.dataclass
class _Outer:
    band: _Checked = section(_Checked, "A section with its own rules.")


def test_load_validates_sections_naming_the_full_key() -> None:
    with pytest.raises(ConfigError, match=r"^band.low: must be < high \(1.0\), got 2.0$"):
        config.load(_Outer, overrides={"band.low": 2})
    assert config.load(_Outer, overrides={"band.low": 0.5}).band.low == 0.5


def test_a_missing_optional_package_becomes_a_user_error_naming_the_install_command() -> None:
    from tooltune.config import MissingDependency, missing_dependency

    err = missing_dependency(ModuleNotFoundError("No module named 'peft'", name="peft"))
    assert isinstance(err, MissingDependency) and isinstance(err, UserError)
    assert str(err).startswith("peft is not installed (needed for LoRA") and "pip install peft" in str(err)
    # tooltune's own modules and unlisted packages stay bugs
    assert missing_dependency(ModuleNotFoundError("x", name="tooltune.nothing")) is None
    assert missing_dependency(ModuleNotFoundError("x", name="left_pad")) is None
    assert missing_dependency(ImportError("cannot import name 'x'")) is None


def test_a_module_missing_inside_bfcl_eval_names_bfcl_evals_install_command() -> None:
    import types

    from tooltune.config import missing_dependency

    def import_a_checker_dependency() -> None:
        import tree_sitter_nowhere  # noqa: F401  (never installed)

    # the same code running as a module of bfcl_eval, as when its checker imports its own dependencies
    inside = types.FunctionType(import_a_checker_dependency.__code__,
                                {"__name__": "bfcl_eval.eval_checker.ast_eval", "__builtins__": __builtins__})
    with pytest.raises(ModuleNotFoundError) as caught:
        inside()
    err = missing_dependency(caught.value)
    assert err is not None and err.__cause__ is caught.value
    assert "bfcl-eval cannot be imported: its dependency 'tree_sitter_nowhere' is not installed" in str(err)
    assert ("pip install -r requirements/bfcl.txt && pip install --no-deps -r requirements/bfcl-nodeps.txt"
            in str(err))
    with pytest.raises(ModuleNotFoundError) as outside:
        import_a_checker_dependency()
    assert missing_dependency(outside.value) is None
