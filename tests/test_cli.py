"""The `tooltune` dispatcher: documented groups, placeholders for missing modules, real dependency errors."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tooltune import __version__, cli


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

