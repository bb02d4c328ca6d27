"""`tooltune` command line: a thin dispatcher over the command groups, and its one error path.

Each group lives in its own module exposing `register(subparsers) -> None`, which adds the group's
parser and sets `func=handler`. Handlers import heavy libraries (torch, trl, bfcl) lazily, so
`tooltune --help` stays fast.

Errors: a handler raises, it does not print and return. An exception that means "the user gave something
wrong" (`USER_ERRORS`) becomes one line `tooltune <command>: <message>` on stderr and exit status 2
(`-v` adds the traceback); any other exception is a bug in tooltune: the traceback, a line saying so,
and exit status 1.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import logging
import re
import sys
import traceback
from collections.abc import Sequence

from tooltune import __version__
from tooltune.config import missing_dependency

logger = logging.getLogger(__name__)

# group name -> (module providing register(), one-line description shown by `tooltune --help`)
GROUPS: dict[str, tuple[str, str]] = {
    "data": ("tooltune.data.commands",
             "Convert, filter, split and export tool-calling datasets (xLAM, ToolACE, BFCL, synthetic)."),
    "train": ("tooltune.training.commands",
              "Train with GRPO + verifiable rewards on TRL: rollout filtering, down-sampling, SFT."),
    "eval": ("tooltune.evaluation.commands",
             "Evaluate a model on BFCL (official checker), API-Bank and ACEBench over seeds and controls."),
    "report": ("tooltune.training.report",
               "Plot a training run's metrics and summarise it in Markdown (evaluation runs: `tooltune eval "
               "report`)."),
    "quickstart": ("tooltune.experiment.commands",
                   "Run the whole pipeline offline on a tiny model in minutes: data, SFT, GRPO, evaluation."),
    "models": ("tooltune.models.commands",
               "Turn published model files into model folders: a GGUF file or package -> safetensors."),
    "bench": ("tooltune.bench_commands", "Run the benchmarks in bench/ and print measured ratios."),
}

EXIT_USER_ERROR = 2
"""Something the user gave is wrong (a flag, a key, a file, a path); the message says what."""
EXIT_BUG = 1
"""An exception no handler expected: a bug in tooltune."""

USER_ERRORS: tuple[tuple[str, str], ...] = (
    ("tooltune.config", "UserError"),  # ConfigError and every other subclass
    ("tooltune.schema", "SchemaError"),  # and its subclasses RecordValueError, DataFileError
    ("tooltune.data.sources.base", "DataFileError"),
    ("tooltune.evaluation.runner", "DataDirError"),
    ("tooltune.models.loading", "ModelLoadError"),
    ("tooltune.generation.backends", "BackendError"),
    ("tooltune.training.report", "MetricsError"),
    ("tooltune.rundir", "RunMismatch"),
    ("tooltune.rundir", "RunFolderBusy"),
    ("tooltune.prompts.chat_template", "ReasoningHistoryLost"),
    ("tooltune.prompts.templates", "BfclPromptError"),
)
"""(module, class) of the tooltune exceptions that mean "the user gave something wrong".

They are looked up in `sys.modules` when an exception reaches `main`: an exception of a class can only
have been raised once its module was imported, so nothing is imported for the lookup, and an entry
whose module is not in this build is skipped. Besides these, the standard library's
FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError and PermissionError (when
they carry a file name or were raised with a message), UnicodeDecodeError and json.JSONDecodeError
are user errors."""

_OS_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


def _register_group(
    subparsers: argparse._SubParsersAction, group: str, module: str, description: str
) -> None:
    mod = importlib.import_module(module)
    mod.register(subparsers)
    if group not in subparsers.choices:
        logger.warning("%s.register() did not add a %r command", module, group)
        return
    # Keep `tooltune --help` documented even when a module registers its parser without help text
    # (argparse lists a sub-command only when add_parser() was given help=).
    listed = [c for c in subparsers._choices_actions if c.dest == group]
    if not listed:
        subparsers._choices_actions.append(subparsers._ChoicesPseudoAction(group, (), description))
    elif not listed[0].help:
        listed[0].help = description


def build_parser() -> argparse.ArgumentParser:
    """The full `tooltune` parser with every command group registered."""
    parser = argparse.ArgumentParser(
        prog="tooltune",
        description="Train tool-calling language models with GRPO and verifiable rewards "
        "(Tool-N1, R2IF, efficient tool-calling RL) and evaluate them fairly.",
        epilog="Run `tooltune <group> --help` for the commands of a group. See README.md.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging: -v for INFO, -vv for DEBUG (default: WARNING)")
    parser.add_argument("--version", action="version", version=f"tooltune {__version__}")
    subparsers = parser.add_subparsers(dest="group", metavar="{" + ",".join(GROUPS) + "}")
    for group, (module, description) in GROUPS.items():
        _register_group(subparsers, group, module, description)
    parser.set_defaults(_group_parsers=subparsers.choices)
    return parser


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=level, format=fmt, datefmt="%H:%M:%S")
    logging.getLogger().setLevel(level)  # also when a host (pytest, a notebook) installed handlers first


def user_error_types() -> tuple[type[BaseException], ...]:
    """The classes of `USER_ERRORS` whose modules are imported (see there)."""
    found = (getattr(sys.modules.get(module), name, None) for module, name in USER_ERRORS)
    return tuple(c for c in found if isinstance(c, type) and issubclass(c, BaseException))


def is_user_error(err: BaseException) -> bool:
    """True when `err` means the user gave something wrong rather than a bug in tooltune."""
    if isinstance(err, _OS_ERRORS):  # about a file the user named, or raised with a message saying so
        return err.filename is not None or (len(err.args) == 1 and isinstance(err.args[0], str))
    return isinstance(err, (UnicodeDecodeError, json.JSONDecodeError, *user_error_types()))


def error_message(err: BaseException) -> str:
    """The one-line message of a user error: the exception's text, a file error as `file: reason`."""
    if isinstance(err, OSError) and err.filename is not None:
        text = f"{err.filename}: {err.strerror or err}"
        if err.filename2 is not None:
            text += f" ({err.filename2})"
    elif isinstance(err, UnicodeDecodeError):
        byte = err.object[err.start : err.start + 1].hex()
        text = f"not valid UTF-8 text (byte 0x{byte} at position {err.start}: {err.reason})"
    elif isinstance(err, json.JSONDecodeError):
        text = f"not valid JSON ({err})"
    elif isinstance(err, KeyError) and len(err.args) == 1:  # KeyError's own text is the repr of its key
        text = str(err.args[0])
    else:
        text = str(err) or type(err).__name__
    return re.sub(r"\s*\n\s*", " ", text.strip())


def _command(args: argparse.Namespace) -> str:
    """`tooltune <group> [<sub-command>]` for messages (a group's sub-command is in `<group>_command`)."""
    words = ["tooltune", args.group or ""]
    sub = getattr(args, f"{args.group}_command", None)
    if isinstance(sub, str):
        words.append(sub)
    return " ".join(w for w in words if w)


def _fail(err: Exception, command: str, verbose: int) -> int:
    """Report an exception that reached `main`; returns the exit status."""
    err = missing_dependency(err) or err  # an optional package not installed: the user's to install
    if is_user_error(err):
        if verbose:
            traceback.print_exception(err)
        print(f"{command}: {error_message(err)}", file=sys.stderr)
        return EXIT_USER_ERROR
    traceback.print_exception(err)
    what = error_message(err)
    what = what if len(what) <= 200 else what[:200] + "…"
    print(f"{command}: this is a bug in tooltune ({type(err).__name__}: {what}); please report it to the "
          "tooltune maintainers with the command line, the output of `tooltune --version` and the "
          "traceback above", file=sys.stderr)
    return EXIT_BUG


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the command that was given (`tooltune data prepare`'s), else the top-level one."""
    found = parser
    group = getattr(args, "group", None)
    sub = args._group_parsers.get(group) if group else None
    if sub is not None:
        found = sub
        name = getattr(args, f"{group}_command", None)
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                found = action.choices[name]
    return found


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Exit with status 2 and one line naming the unknown arguments and, for a mistyped flag, the flags
    of that command that look like it (`--sede` -> `--seed`)."""
    command = _command_parser(parser, args)
    flags: dict[str, str] = {}  # every spelling -> the action's first long spelling
    for action in command._actions:
        spellings = [o for o in action.option_strings if o.startswith("--")]
        for o in spellings:
            flags[o] = spellings[0]
    hints: list[str] = []
    for token in extra:
        if token.startswith("--") and token.split("=", 1)[0] not in flags:
            near = difflib.get_close_matches(token.split("=", 1)[0], list(flags), n=6, cutoff=0.6)
            hints += [flags[n] for n in near if flags[n] not in hints][:3]
    hint = f" (did you mean {' or '.join(hints)}?)" if hints else ""
    command.exit(EXIT_USER_ERROR, f"{command.prog}: error: unrecognized arguments: {' '.join(extra)}{hint}; "
                 f"`{command.prog} --help` lists the options\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tooltune` console script; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Logging is set up before the groups are imported so that -v shows why a group failed to load;
    # only the flags before the group name are global.
    head = argv[: next((i for i, a in enumerate(argv) if a in GROUPS), len(argv))]
    _configure_logging(sum(2 if a == "-vv" else 1 for a in head if a in ("-v", "--verbose", "-vv")))
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unrecognized(parser, args, extra)
    func = getattr(args, "func", None)
    if func is None:
        # A group given without a sub-command prints that group's help; nothing given prints the top help.
        sub = args._group_parsers.get(args.group) if args.group else None
        (sub or parser).print_help()
        return 0 if args.group is None else EXIT_USER_ERROR
    try:
        result = func(args)
    except KeyboardInterrupt:
        print(f"{_command(args)}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        return _fail(e, _command(args), getattr(args, "verbose", 0))
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
