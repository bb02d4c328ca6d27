"""The one configuration mechanism: dataclasses whose fields carry their help once.

Every configurable thing (a training run, the quickstart, evaluation controls, sampling, a backend)
is a dataclass whose fields are declared with `option(default, help, choices, min=..., max=...)`
(`fields`). From that single declaration come
- YAML presets: `load(cls, "configs/x.yaml")` (unknown keys, bad types, values outside the declared
  choices or range are errors naming the key; `loading`);
- overrides with one syntax everywhere: `--section.key value` (or `--key value` for flat configs),
  given as a dict `{"grpo.lr": 1e-4}` or as the command-line token list;
- command-line flags: `add_arguments(parser, cls)` adds one flag per field, with the field's help,
  default and choices, and `given_overrides(args)` returns the ones the user actually typed
  (`arguments`);
- reference docs: `describe(cls)` lists (key, default, help) for every field.

Also here, for every command: `UserError`, the base of the errors that mean "the user gave something
wrong" (the command line prints their message on one line and exits with status 2), and the checks
of values that name things on disk or in a registry (`checks`: `prepare_output`, `require_file`,
`check_model_path`, `unknown_name`, `check_prompt_text`), so that a command refuses them before any
work starts. `missing_dependency` turns the ModuleNotFoundError of an optional package into
`MissingDependency`, a user error naming the command that installs it (`dependencies`).
`Registry` is the one shape of every registry (names to things, one error for an unknown name: the
setting, the closest names; `registry`).
"""

from tooltune.config.arguments import add_arguments, given_overrides
from tooltune.config.checks import (
    check_model_path,
    check_prompt_text,
    closest,
    looks_local,
    prepare_output,
    require_file,
    unknown_name,
)
from tooltune.config.dependencies import MissingDependency, missing_dependency
from tooltune.config.fields import ConfigError, Range, UserError, option, section
from tooltune.config.loading import (
    apply,
    check_choices,
    check_value,
    check_values,
    describe,
    dump,
    load,
    parse_overrides,
    read_yaml,
    set_key,
    to_dict,
)
from tooltune.config.registry import Registry, UnknownName

__all__ = [
    "ConfigError",
    "MissingDependency",
    "Range",
    "Registry",
    "UnknownName",
    "UserError",
    "add_arguments",
    "apply",
    "check_choices",
    "check_model_path",
    "check_prompt_text",
    "check_value",
    "check_values",
    "closest",
    "describe",
    "dump",
    "given_overrides",
    "load",
    "looks_local",
    "missing_dependency",
    "option",
    "parse_overrides",
    "prepare_output",
    "read_yaml",
    "require_file",
    "section",
    "set_key",
    "to_dict",
    "unknown_name",
]
