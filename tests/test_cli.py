"""The `tooltune` dispatcher (documented groups, placeholders, real dependency errors), its one error path
(a user error is one line and exit status 2, anything else a bug with a traceback), the flags that
`tooltune.config.add_arguments` generates from config dataclasses, and the reported user mistakes of
`eval`, `report` and `quickstart` (those of `data` and `train` are in their own test files)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import socket
import subprocess
import sys
import textwrap
from collections.abc import Sequence
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
        {"good": ("fakepkg_cli.good", "A working group.")},
    )
    assert cli.main(["-v", "good", "--n", "7"]) == 3
    assert capsys.readouterr().out.strip() == "ran 7 1"
    assert restore_root_logging.level == logging.INFO
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "A working group." in out


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


def test_a_field_added_to_a_benchmarks_controls_becomes_its_eval_flag(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tooltune.evaluation import commands as eval_commands
    from tooltune.evaluation.benchmark import BENCHMARKS
    from tooltune.evaluation.bfcl.benchmark import BfclControls

    @dataclasses.dataclass
    class MoreControls(BfclControls):
        tool_order: str = option("as_given", "Order of the tools in the prompt.", ("as_given", "shuffled"))

    bench = BENCHMARKS["bfcl"]
    monkeypatch.setattr(bench, "controls_type", MoreControls)
    bfcl = _subparser(cli.build_parser(), "eval", "bfcl")
    action = _option_actions(bfcl)["--tool-order"]
    assert action.choices == ["as_given", "shuffled"] and "Order of the tools" in action.help
    assert "--tool-order" not in _option_actions(_subparser(cli.build_parser(), "eval", "apibank"))
    out = str(tmp_path / "x")
    args = bfcl.parse_args(["--out", out, "--tool-order", "shuffled", "--keep-reasoning", "false",
                            "--name-style", "underscore"])
    _, controls, _, _ = eval_commands._configs(args, bench)
    assert isinstance(controls, MoreControls)
    assert controls.tool_order == "shuffled" and controls.keep_reasoning is False
    assert controls.name_style == "underscore"


def test_a_benchmarks_own_controls_are_its_flags_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """BFCL's --name-style is a flag of `tooltune eval bfcl`, not of the other benchmarks; `tooltune eval
    ace` (any benchmark) takes it and refuses it for a benchmark that has no such option."""
    parser = cli.build_parser()
    assert "--name-style" in _option_actions(_subparser(parser, "eval", "bfcl"))
    assert "--name-style" not in _option_actions(_subparser(parser, "eval", "apibank"))
    assert "--name-style" in _option_actions(_subparser(parser, "eval", "ace"))
    code = cli.main(["eval", "ace", "--benchmark", "apibank", "--name-style", "underscore",
                     "--out", str(tmp_path / "ace"), "--predictions", str(tmp_path / "p.jsonl"),
                     "--student-endpoint", "http://localhost:1/v1", "--student-model-name", "s"])
    assert code == 2
    assert "controls.name_style: an option of bfcl, not of apibank" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ the error path


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `tooltune <command>: <message>` a user error prints on stderr; no traceback anywhere."""
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err
    lines = [line for line in err.splitlines() if line.startswith("tooltune ")]
    assert len(lines) == 1, err
    return lines[0]


def run_cli(argv: Sequence[str]) -> int:
    """`cli.main(argv)`, reading a handler's SystemExit the way the interpreter does (a message: status 1)."""
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return 1
        return 0 if e.code is None else int(e.code)


_RAISING = """
    import json

    from tooltune.config import ConfigError


    class RunMismatch(Exception):
        pass


    def register(subparsers):
        p = subparsers.add_parser("boom", help="raises what it is told")
        p.add_argument("what")
        p.set_defaults(func=run)


    def run(args):
        what = args.what
        if what == "utf8":
            b"ok \\xc6 not".decode("utf-8")
        if what == "json":
            json.loads("{nope")
        raise {
            "config": ConfigError("grpo.temperature: must be > 0, got -1.0"),
            "multiline": ConfigError("config: x.yaml is not valid YAML: line 1\\n  column 2"),
            "missing": FileNotFoundError(2, "No such file or directory", "data/x.jsonl"),
            "said": FileNotFoundError("runs/x: no train.jsonl or val.jsonl to validate"),
            "reset": ConnectionResetError(104, "Connection reset by peer"),
            "bug": RuntimeError("internal state broken"),
            "mismatch": RunMismatch("runs/a holds a run of another config"),
            "interrupt": KeyboardInterrupt(),
        }[what]
"""


@pytest.fixture
def boom(fake_groups) -> None:
    fake_groups({"boom": _RAISING}, {"boom": ("fakepkg_cli.boom", "Raises.")})


@pytest.mark.parametrize(
    ("what", "line"),
    [
        ("config", "tooltune boom: grpo.temperature: must be > 0, got -1.0"),
        ("multiline", "tooltune boom: config: x.yaml is not valid YAML: line 1 column 2"),
        ("missing", "tooltune boom: data/x.jsonl: No such file or directory"),
        ("said", "tooltune boom: runs/x: no train.jsonl or val.jsonl to validate"),
        ("utf8", "tooltune boom: not valid UTF-8 text (byte 0xc6 at position 3: invalid continuation byte)"),
        ("json", "tooltune boom: not valid JSON (Expecting property name enclosed in double quotes: "
                 "line 1 column 2 (char 1))"),
    ],
)
def test_a_user_error_is_one_line_and_status_2(boom, capsys: pytest.CaptureFixture[str], what: str,
                                               line: str) -> None:
    assert cli.main(["boom", what]) == cli.EXIT_USER_ERROR == 2
    assert one_error_line(capsys) == line


def test_verbose_adds_the_traceback_to_a_user_error(boom, capsys: pytest.CaptureFixture[str],
                                                    restore_root_logging: logging.Logger) -> None:
    assert cli.main(["-v", "boom", "config"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert err.rstrip().endswith("tooltune boom: grpo.temperature: must be > 0, got -1.0")


@pytest.mark.parametrize("what", ["bug", "reset"])
def test_any_other_exception_is_a_bug_with_its_traceback(boom, capsys: pytest.CaptureFixture[str],
                                                         what: str) -> None:
    assert cli.main(["boom", what]) == cli.EXIT_BUG == 1
    err = capsys.readouterr().err
    assert "Traceback" in err
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("tooltune boom: this is a bug in tooltune (")
    assert "please report it" in last and "traceback above" in last


def test_interrupt_exits_130(boom, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["boom", "interrupt"]) == 130
    assert capsys.readouterr().err.strip() == "tooltune boom: interrupted"


def test_user_error_classes_are_found_where_their_modules_are_loaded(
    boom, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooltune.config import ConfigError, UserError
    from tooltune.generation.backends import MissingPrediction
    from tooltune.rundir import RunFolderBusy, RunMismatch
    from tooltune.schema import SchemaError

    assert {UserError, SchemaError, RunMismatch, RunFolderBusy} <= set(cli.user_error_types())
    assert cli.is_user_error(ConfigError("x"))
    assert cli.error_message(MissingPrediction("no prediction for id 'a'")) == "no prediction for id 'a'"
    assert cli.main(["boom", "mismatch"]) == 1  # not declared: a bug
    capsys.readouterr()
    monkeypatch.setattr(cli, "USER_ERRORS", (*cli.USER_ERRORS, ("fakepkg_cli.boom", "RunMismatch"),
                                             ("fakepkg_cli.not_in_this_build", "Gone")))
    assert cli.main(["boom", "mismatch"]) == 2
    assert one_error_line(capsys) == "tooltune boom: runs/a holds a run of another config"


# ------------------------------------------------------------------------------------ reported mistakes


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def bfcl_eval() -> None:
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")


def _eval(tmp_path: Path, *extra: str) -> list[str]:
    return ["eval", "bfcl", "--categories", "simple_javascript", "--no-report", *extra]


def test_eval_refuses_what_it_cannot_read_or_reach(
    bfcl_eval, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = ["--out", str(tmp_path / "e")]
    assert run_cli(_eval(tmp_path, "--predictions", "missing.jsonl", *out)) == 2
    assert one_error_line(capsys) == "tooltune eval bfcl: predictions: file not found: missing.jsonl"
    (tmp_path / "garbage.bin").write_bytes(bytes(range(256))[::-1] * 8)
    assert run_cli(_eval(tmp_path, "--predictions", "garbage.bin", *out)) == 2
    line = one_error_line(capsys)
    assert line.startswith("tooltune eval bfcl: predictions: garbage.bin:1: not valid UTF-8")
    assert run_cli(_eval(tmp_path, "--model", "./nomodel", *out)) == 2
    assert one_error_line(capsys) == ("tooltune eval bfcl: model: model folder not found: ./nomodel "
                                      "(a hub id looks like org/name)")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    assert run_cli(_eval(tmp_path, "--endpoint", url, "--model-name", "m", "--retries", "0", "--timeout", "2",
                         *out)) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"tooltune eval bfcl: endpoint {url}: cannot connect") and "server running" in line
    assert run_cli(_eval(tmp_path, "--scripted", "--seeds", "-2", *out)) == 2
    assert one_error_line(capsys) == "tooltune eval bfcl: seeds: must be >= 1, got -2"
    assert run_cli(_eval(tmp_path, "--scripted", "--template", "nosuch", *out)) == 2
    assert "template: unknown template 'nosuch'" in one_error_line(capsys)


def test_eval_refuses_an_output_path_it_cannot_write(
    bfcl_eval, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "some_file.txt").write_text("x")
    assert run_cli(_eval(tmp_path, "--scripted", "--out", tmp_path / "some_file.txt" / "sub")) == 2
    assert "some_file.txt" in one_error_line(capsys)
    if Path("/proc/self").is_dir():
        assert run_cli(_eval(tmp_path, "--scripted", "--out", "/proc/x")) == 2
        assert "/proc/x" in one_error_line(capsys)


def test_eval_names_an_unknown_category_and_the_closest(
    bfcl_eval, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "bfcl", "--scripted", "--categories", "simple_pyton", "--out", tmp_path / "e"]
    assert run_cli(argv) == 2
    line = one_error_line(capsys)
    assert "categories" in line and "simple_pyton" in line and "simple_python" in line


def test_eval_report_on_a_missing_run_or_an_unwritable_out(
    bfcl_eval, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["eval", "report", tmp_path / "no_run", "--out", tmp_path / "r.md"]) == 2
    assert "no_run" in one_error_line(capsys)
    run = tmp_path / "run"
    assert run_cli(_eval(tmp_path, "--scripted", "--seeds", "1", "--out", run)) == 0
    capsys.readouterr()
    (tmp_path / "some_file.txt").write_text("x")
    assert run_cli(["eval", "report", run, "--out", tmp_path / "some_file.txt" / "r.md"]) == 2
    assert "some_file.txt" in one_error_line(capsys)
    if Path("/proc/self").is_dir():
        assert run_cli(["eval", "report", run, "--out", "/proc/x/r.md"]) == 2
        assert "/proc/x" in one_error_line(capsys)


def test_report_refuses_an_output_folder_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"stage": "grpo", "step": 1, "reward": 0.5}) + "\n")
    (tmp_path / "some_file.txt").write_text("x")
    assert run_cli(["report", tmp_path, "--out", tmp_path / "some_file.txt" / "r"]) == 2
    assert one_error_line(capsys).startswith(f"tooltune report: --out {tmp_path}/some_file.txt/r: ")
    if Path("/proc/self").is_dir():
        assert run_cli(["report", tmp_path, "--out", "/proc/x"]) == 2
        assert one_error_line(capsys).startswith("tooltune report: --out /proc/x: cannot write there (")
    assert run_cli(["report", tmp_path / "nope"]) == 2
    assert "nope/metrics.jsonl: no metrics" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--train.grpo.learning_rate", "abc"], "train.grpo.learning_rate: expected float, got 'abc'"),
        (["--train.grpo.max_steps", "-5"], "train.grpo.max_steps: must be -1 or >= 1, got -5"),
        (["--train.grpo.temperature", "-1"], "train.grpo.temperature: must be > 0, got -1.0"),
        (["--train.reward.components", "{binry: 1}"],
         "train.reward.components: unknown reward 'binry' (did you mean binary?)"),
        (["--threads", "0"], "threads: must be >= 1, got 0"),
        (["--stop-after", "sftt"], "--stop-after: 'sftt' is not a stage"),
    ],
)
def test_quickstart_refuses_bad_settings_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert run_cli(["quickstart", "--out", tmp_path / "q", *flags]) == 2
    assert message in one_error_line(capsys)
    assert not (tmp_path / "q").exists()


def test_quickstart_refuses_an_output_folder_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "some_file.txt").write_text("x")
    assert run_cli(["quickstart", "--out", tmp_path / "some_file.txt" / "q"]) != 0
    assert "some_file.txt" in one_error_line(capsys)


def test_eval_refuses_a_mistyped_system_prompt_name(
    bfcl_eval, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "bfcl", "--scripted", "--categories", "simple_python", "--system-prompt", "bfcl_stong",
            "--out", tmp_path / "e"]
    assert run_cli(argv) == 2
    line = one_error_line(capsys)
    assert "system_prompt" in line and "bfcl_strong" in line
    assert not (tmp_path / "e" / "verdicts.jsonl").exists()


def test_prompt_errors_are_user_errors() -> None:
    from tooltune.prompts.chat_template import ReasoningHistoryLost
    from tooltune.prompts.templates import BfclPromptError

    assert cli.is_user_error(ReasoningHistoryLost("controls.keep_reasoning: the chat template drops it"))
    assert cli.is_user_error(BfclPromptError("bfcl-eval is not installed"))
    assert not cli.is_user_error(RuntimeError("internal state broken"))


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["quickstart", "--sede", "0"], "--seed"),
        (["data", "prepare", "--sede", "0"], "--seed"),
        (["quickstart", "--thredas=1"], "--threads"),
    ],
)
def test_a_mistyped_plain_flag_names_the_closest_flag_of_its_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    assert run_cli([*argv, "--out", tmp_path / "never"]) == 2
    assert not (tmp_path / "never").exists()
    line = one_error_line(capsys)
    command = " ".join(argv[: 2 if argv[0] == "data" else 1])
    typed = " ".join(argv[2 if argv[0] == "data" else 1 :])
    assert line.startswith(f"tooltune {command}: error: unrecognized arguments: {typed}")
    assert f"(did you mean {flag}" in line  # the closest flag first; others as close may follow
    assert "usage:" not in capsys.readouterr().err


def test_a_missing_optional_package_is_a_user_error_naming_its_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"stage": "grpo", "step": 1, "reward": 0.5}) + "\n")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ModuleNotFoundError
    assert run_cli(["report", tmp_path]) == 2
    line = one_error_line(capsys)
    assert line.startswith("tooltune report: matplotlib is not installed (needed for plots")
    assert "pip install matplotlib" in line and "requirements/base.txt" in line
