"""The `tooltune` dispatcher (documented groups, placeholders, real dependency errors) and the flags that
`tooltune.config.add_arguments` generates from config dataclasses for every command."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tooltune import __version__, cli, config
from tooltune.config import option, section


@pytest.fixture
def fake_groups(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Replace the group table with groups backed by modules written into a temporary package."""

    def make(modules: dict[str, str], groups: dict[str, tuple[str, str]]) -> None:
        pkg = tmp_path / "fakepkg_cli"
        pkg.mkdir(exist_ok=True)
        (pkg / "__init__.py").write_text("")
        for name, source in modules.items():
            (pkg / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(tmp_path))
        for mod in [m for m in sys.modules if m.startswith("fakepkg_cli")]:
            monkeypatch.delitem(sys.modules, mod)
        monkeypatch.setattr(cli, "GROUPS", groups)

    return make


@pytest.fixture
def restore_root_logging():
    root = logging.getLogger()
    level = root.level
    yield root
    root.setLevel(level)


def test_help_lists_every_group_with_a_description(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.split()}
    assert {"data", "train", "eval", "report", "quickstart", "bench"} <= listed
    parser = cli.build_parser()
    helps = {a.dest: a.help for a in parser._subparsers._group_actions[0]._choices_actions}
    assert set(helps) == set(cli.GROUPS)
    assert all(h and h.strip() for h in helps.values()), helps


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"tooltune {__version__}"


def test_missing_module_gets_a_placeholder(fake_groups, capsys: pytest.CaptureFixture[str]) -> None:
    fake_groups({}, {"ghost": ("fakepkg_cli.does_not_exist", "A group not in this build."),
                     "ghostpkg": ("fakepkg_cli_absent.commands", "Its whole package is absent.")})
    assert cli.main(["ghost", "--any", "thing"]) == cli.EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "tooltune ghost: not available in this build" in err
    assert "fakepkg_cli.does_not_exist" in err
    assert cli.main(["ghostpkg"]) == cli.EXIT_UNAVAILABLE
    assert "not available in this build" in capsys.readouterr().err


def test_broken_dependency_is_reported_not_hidden(fake_groups, capsys: pytest.CaptureFixture[str]) -> None:
    fake_groups(
        {"broken": "import tooltune_dependency_that_is_not_installed\n\ndef register(subparsers): ...\n"},
        {"broken": ("fakepkg_cli.broken", "A group whose dependency is missing.")},
    )
    assert cli.main(["broken"]) == cli.EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "cannot be loaded" in err
    assert "tooltune_dependency_that_is_not_installed" in err
    assert "not available in this build" not in err


def test_a_module_that_fails_for_another_reason_is_not_swallowed(fake_groups) -> None:
    fake_groups({"buggy": "raise RuntimeError('bug at import')\n"},
                {"buggy": ("fakepkg_cli.buggy", "A group with a bug.")})
    with pytest.raises(RuntimeError, match="bug at import"):
        cli.build_parser()


def test_registered_group_runs_and_inherits_a_description(
    fake_groups, capsys: pytest.CaptureFixture[str], restore_root_logging: logging.Logger
) -> None:
    fake_groups(
        {"good": """
            import logging

            def register(subparsers):
                p = subparsers.add_parser("good")
                p.add_argument("--n", type=int, default=1)
                p.set_defaults(func=lambda args: print("ran", args.n, args.verbose) or 3)
            """},
        {"good": ("fakepkg_cli.good", "A working group."), "gone": ("fakepkg_cli.gone", "Absent.")},
    )
    assert cli.main(["-v", "good", "--n", "7"]) == 3
    assert capsys.readouterr().out.strip() == "ran 7 1"
    assert restore_root_logging.level == logging.INFO
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "A working group." in out and "Absent." in out


def test_is_missing_distinguishes_the_module_from_its_dependencies() -> None:
    def err(name: str) -> ModuleNotFoundError:
        return ModuleNotFoundError(f"No module named {name!r}", name=name)

    assert cli._is_missing(err("tooltune.data.commands"), "tooltune.data.commands")
    assert cli._is_missing(err("tooltune.data"), "tooltune.data.commands")
    assert not cli._is_missing(err("trl"), "tooltune.training.commands")
    assert not cli._is_missing(err("tooltune.data.sources"), "tooltune.data.commands")
    assert not cli._is_missing(ImportError("cannot import name 'x'", name="tooltune.data.commands"),
                               "tooltune.data.commands")


def test_help_is_fast_because_no_heavy_library_is_imported(repo_root: Path) -> None:
    code = (
        "import sys; from tooltune.cli import build_parser; build_parser(); "
        "heavy = ('torch', 'transformers', 'trl', 'bfcl_eval', 'datasets'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True, text=True,
                          timeout=120, check=True)
    assert proc.stdout.strip() == "[]", f"heavy imports at `tooltune --help`: {proc.stdout}{proc.stderr}"



# ------------------------------------------------------------------------------------ generated flags


@dataclasses.dataclass
class _Inner:
    depth: int = option(2, "How deep.")


@dataclasses.dataclass
class _Demo:
    max_tokens: int = option(64, "Longest output, in tokens.")
    mode: str = option("strict", "Parser mode.", ("strict", "substring"))
    keep: bool = option(True, "Keep the reasoning.")
    tags: dict = option({"a": 1}, "Extra tags.")
    inner: _Inner = section(_Inner, "Nested part.")


def _option_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def _subparser(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_flags_carry_the_field_help_default_and_choices() -> None:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, _Demo)
    actions = _option_actions(parser)
    flags = {"--max-tokens", "--max_tokens", "--mode", "--keep", "--no-keep", "--tags", "--inner.depth"}
    assert flags <= set(actions)
    assert actions["--max-tokens"].help == "Longest output, in tokens. (default: 64)"
    assert actions["--mode"].choices == ["strict", "substring"]
    assert actions["--inner.depth"].help == "How deep. (default: 2)"
    assert "(default: true; --no-keep turns it off)" in actions["--keep"].help
    assert actions["--tags"].help == 'Extra tags. (default: {"a": 1})'
    for key, _, help_ in config.describe(_Demo):  # the same help text as the reference listing
        assert actions["--" + key.replace("_", "-")].help.startswith(help_.split(" Choices:")[0])

    args = parser.parse_args(["--max-tokens", "8", "--no-keep", "--tags", "{b: 2}", "--inner.depth", "3"])
    given = config.given_overrides(args)
    assert given == {"max_tokens": "8", "keep": "false", "tags": "{b: 2}", "inner.depth": "3"}  # typed only
    cfg = config.load(_Demo, overrides=given)
    assert (cfg.max_tokens, cfg.keep, cfg.tags, cfg.inner.depth) == (8, False, {"b": 2}, 3)
    assert cfg.mode == "strict"
    assert config.load(_Demo, overrides=config.given_overrides(parser.parse_args(["--keep"]))).keep is True
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "loose"])


def test_two_configs_share_a_parser_through_groups_and_flag_prefixes() -> None:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, _Demo, group="main", exclude=("tags",))
    config.add_arguments(parser, _Demo, group="other", flag_prefix="other-", only=("max_tokens", "keep"))
    actions = _option_actions(parser)
    assert "--tags" not in actions and "--other-mode" not in actions and "--other-max-tokens" in actions
    args = parser.parse_args(["--max-tokens", "5", "--other-max-tokens", "7", "--no-other-keep"])
    assert config.given_overrides(args, "main") == {"max_tokens": "5"}
    assert config.given_overrides(args, "other") == {"max_tokens": "7", "keep": "false"}
    assert config.given_overrides(args) == {}


def test_backend_flags_are_the_same_for_eval_and_data_select() -> None:
    from tooltune.generation import BackendConfig

    parser = cli.build_parser()
    commands = [_subparser(parser, "eval", b) for b in ("bfcl", "apibank", "acebench")]
    commands.append(_subparser(parser, "data", "select"))
    helps = []
    for command in commands:
        actions = _option_actions(command)
        flags = {f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(BackendConfig)}
        flags.discard("--batch-size")  # one --batch-size per command: the command's own
        assert flags <= set(actions), flags - set(actions)
        helps.append({f: actions[f].help for f in flags})
    assert all(h == helps[0] for h in helps)
    assert "Local Hugging Face model directory" in helps[0]["--model"]
    assert "(default: OPENAI_API_KEY)" in helps[0]["--api-key-env"]
    acebench = _option_actions(commands[2])
    assert {"--user-endpoint", "--user-model-name", "--user-api-key-env"} <= set(acebench)
    assert "--user-model" not in acebench


def test_a_field_added_to_controls_becomes_an_eval_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    from tooltune.evaluation import commands as eval_commands
    from tooltune.evaluation.protocol import Controls

    @dataclasses.dataclass
    class MoreControls(Controls):
        tool_order: str = option("as_given", "Order of the tools in the prompt.", ("as_given", "shuffled"))

    monkeypatch.setattr(eval_commands, "Controls", MoreControls)
    bfcl = _subparser(cli.build_parser(), "eval", "bfcl")
    action = _option_actions(bfcl)["--tool-order"]
    assert action.choices == ["as_given", "shuffled"] and "Order of the tools" in action.help
    args = bfcl.parse_args(["--out", "x", "--tool-order", "shuffled", "--keep-reasoning", "false"])
    _, controls, _, _ = eval_commands._configs(args)
    assert isinstance(controls, MoreControls)
    assert controls.tool_order == "shuffled" and controls.keep_reasoning is False
