"""The benchmark interface: one registered object per benchmark, used by every evaluation command.

A benchmark says how to load its items under the protocol `Controls`, how each completion is scored
(under `Controls.scoring`, a `Scoring`: `official`, the benchmark's own code rule for rule, or
`corrected`, named fixes), how verdicts aggregate into its published scores, how a perfect model answers
(the harness self-check) and which options of its own it has (`controls_type`, a `Controls` subclass:
`tooltune eval` turns its fields into flags). Two capabilities are opt-in mixins:
`ProvidesAceGold` (the entries with one correct call list, for R2IF's ACE metric) and `SimulatesUsers`
(entries played against a simulated user); `require` gives a caller the capability or an error naming
the benchmark. Multi-turn entries (`Episode`) are played by the benchmark's `EpisodeRunner`, given the
entries and one `EpisodeContext`.

The runner (`tooltune.evaluation.runner`), ACE (`tooltune.evaluation.r2if_ace`), the ground-truth player
(`tooltune.evaluation.scripted`), `tooltune eval` and the reports ask `BENCHMARKS` and never branch on
a benchmark's name, so adding a benchmark is one module with a `Benchmark` subclass decorated with
`register_benchmark`, and its module named in `BENCHMARK_MODULES`.
"""

from __future__ import annotations

import abc
import functools
import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from tooltune.config import ConfigError, Registry
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import Backend, GenerationRequest, MissingPrediction, Sampling
from tooltune.parsing import prefix_fails
from tooltune.prompts import grammar_for, prompt_tools, render_prompt
from tooltune.schema import Sample, ToolCall

BENCHMARK_MODULES = (
    "tooltune.evaluation.bfcl.benchmark",
    "tooltune.evaluation.apibank.benchmark",
    "tooltune.evaluation.acebench.benchmark",
    "tooltune.evaluation.mcp.benchmark",
)
"""The modules that register the built-in benchmarks (imported on the first registry lookup)."""

DATA_DIR_ENV = "TOOLTUNE_DATA_DIR"
"""Environment variable naming the folder that holds one sub-folder per benchmark (apibank/, acebench/)."""

Record = Callable[..., None]
"""`record(verdict, result=None)`: store one entry's verdict (and the raw result to replay it)."""


class Episode(Protocol):
    """A multi-turn entry: what the runner and the verdict log read of it (BFCL's `BfclEntry`,
    ACEBench's `AgentEntry`, an MCP task's `McpEntry`)."""

    @property
    def id(self) -> str: ...

    @property
    def category(self) -> str: ...


EpisodeT = TypeVar("EpisodeT", bound=Episode)


@dataclass(frozen=True)
class EpisodeContext:
    """What one seed's episodes are played with: the model's `backend`, the protocol `controls` and
    `sampling`, the `seed`, `record` (called once per entry), the `user_backend` that plays the
    user in simulated-user episodes (None: none given) and the run folder `run_dir`, where episodes
    that keep state between entries (BFCL's memory snapshots) write it (None: no folder, a temporary one)."""

    backend: Backend
    controls: Controls
    sampling: Sampling
    seed: int
    record: Record
    user_backend: Backend | None = None
    run_dir: Path | None = None


EpisodeRunner = Callable[[list[EpisodeT], EpisodeContext], None]
"""`run(entries, context)`: play and score the multi-turn entries of one seed, calling
`context.record` once per entry."""


class DataDirError(ValueError):
    """A benchmark's data folder was not given or does not exist; the message names both ways to give it."""


def benchmark_data_dir(benchmark: str, data_dir: str | os.PathLike | None = None) -> Path:
    """The folder of `benchmark`'s files: `data_dir` if given, else `$TOOLTUNE_DATA_DIR/<benchmark>`.

    Raises DataDirError naming `--data-dir` and TOOLTUNE_DATA_DIR when neither is given or the folder
    is missing; nothing else is searched."""
    env = os.environ.get(DATA_DIR_ENV)
    how = f"pass --data-dir DIR or set {DATA_DIR_ENV} to the folder holding {benchmark}/"
    if data_dir:
        path, origin = Path(data_dir), "--data-dir"
    elif env:
        path, origin = Path(env) / benchmark, f"${DATA_DIR_ENV}/{benchmark}"
    else:
        raise DataDirError(f"{benchmark}: no benchmark data folder given: {how}")
    if not path.is_dir():
        raise DataDirError(f"{benchmark}: data folder {path} (from {origin}) not found: {how}")
    return path


@dataclass
class Task:
    """One single-turn item: the prompt to complete and how to score a completion; `tools` go to the
    chat template with the prompt (``native``: `tooltune.prompts.prompt_tools`; None otherwise)."""

    id: str
    category: str
    messages: list[dict[str, Any]]
    score: Callable[[str], Verdict]
    tools: list[dict[str, Any]] | None = None
    decided: Callable[[str], bool] | None = None
    """True when every completion that starts with the given text gets the same verdict (generation may
    stop there: `format_decided`); None: the verdict is known only at the end."""


@dataclass
class Prepared(Generic[EpisodeT]):
    """A benchmark's items under one set of controls: single-turn `tasks`, multi-turn `episodes` (played
    by `run_episodes`), the files they came from (hashed into the manifest) and the categories skipped."""

    tasks: list[Task]
    data_files: list[str]
    episodes: list[EpisodeT] = field(default_factory=list)
    run_episodes: EpisodeRunner[EpisodeT] | None = None
    system_extra: str = ""
    skipped: list[str] = field(default_factory=list)

    @property
    def categories(self) -> list[str]:
        return sorted({t.category for t in self.tasks} | {e.category for e in self.episodes})


@dataclass
class AceGold:
    """The entries ACE runs on: categories asked, categories kept, id -> correct calls, left-out reasons."""

    categories: list[str]
    kept: list[str]
    gold: dict[str, list[ToolCall]]
    left_out: dict[str, str]


def render_task(sample: Sample, controls: Controls, extra: str = "") -> list[dict[str, Any]]:
    """`sample`'s prompt under `controls`; `extra` is appended to the system prompt (a benchmark's own
    instructions, e.g. ACEBench's special-case phrases)."""
    return render_prompt(sample, controls.resolve(extra))


def single_turn_task(sample: Sample, category: str, controls: Controls, score: Callable[[str], Verdict],
                     extra: str = "", decided: Callable[[str], bool] | None = None) -> Task:
    """A `Task` for `sample`: rendered under `controls` (tools to the chat template for ``native``);
    `decided`: see `Task.decided` (`format_decided`)."""
    messages = render_task(sample, controls, extra)
    return Task(sample.id, category, messages, score, prompt_tools(sample, controls), decided)


def format_decided(controls: Controls) -> Callable[[str], bool] | None:
    """`Task.decided` for a scorer whose verdict on a completion whose format fails (the grammar decodes
    no calls) does not depend on the completion's text: a prefix that no continuation can complete into
    a passing format (`tooltune.parsing.prefix_fails` under the controls' grammar and mode) decides the
    verdict. None where the grammar never knows before the end. A benchmark passes it only for entries
    whose scorer reads nothing but the decoded calls (not, say, an answer phrase in free text)."""
    grammar = grammar_for(controls.prompt_template)
    if grammar.prefix_fails is None:
        return None
    return functools.partial(prefix_fails, grammar=grammar, mode=controls.mode)


def answer_policy(answers: Mapping[str, str], play_episode: Callable[[GenerationRequest], str] | None = None
                  ) -> Callable[[GenerationRequest], str]:
    """A `ScriptedBackend` policy: the fixed answer of a single-turn id, `play_episode` for a multi-turn step
    (a request whose meta names its turn); an id with neither is a `MissingPrediction`."""

    def play(r: GenerationRequest) -> str:
        if "turn" in r.meta and play_episode is not None:
            return play_episode(r)
        if r.id not in answers:
            raise MissingPrediction(f"no ground truth for id {r.id!r}")
        return answers[r.id]

    return play


def split_categories(categories: Sequence[str] | str | None) -> list[str] | None:
    """A user's category list (comma-separated text or a sequence); None for all ('' and 'all' too)."""
    if categories in (None, "", "all"):
        return None
    items = categories.split(",") if isinstance(categories, str) else list(categories)
    return [c.strip() for c in items if c.strip()]


class Benchmark(abc.ABC):
    """One benchmark: its items, scoring, aggregation, ground-truth player and its own options.

    Subclasses set the class attributes and implement `prepare`, `scores` and `answers`; a benchmark
    with ACE gold or simulated users also derives from `ProvidesAceGold` or `SimulatesUsers`."""

    name: ClassVar[str]
    help: ClassVar[str]
    uses_data_dir: ClassVar[bool] = True
    """False when the data ships with a package (BFCL): no --data-dir."""
    controls_type: ClassVar[type[Controls]] = Controls
    """The controls this benchmark runs under: `Controls`, or a subclass adding the benchmark's own
    options (flags of `tooltune eval <name>`, fields of its manifest and run identity)."""
    scoring_packages: ClassVar[tuple[str, ...]] = ("tooltune",)
    """Packages whose version changes the verdicts (part of a run's identity)."""
    formulas: ClassVar[Mapping[str, str]] = {}
    """How each aggregate in `scores` is computed (written into summary.json and the report)."""
    report_tables: ClassVar[tuple[tuple[str, tuple[tuple[str, str], ...]], ...]] = ()
    """(title, ((column, summary key), ...)) tables the report draws for runs of this benchmark."""
    report_not_run: ClassVar[Mapping[str, str]] = {}
    """Summary keys of those tables that are never computed (a part that cannot run here), with the text
    the report shows in their place."""

    def controls(self, controls: Controls | None = None) -> Controls:
        """`controls` as this benchmark's `controls_type` (`Controls.cast`; None: its defaults)."""
        return self.controls_type() if controls is None else self.controls_type.cast(controls)

    def data_dir(self, data_dir: str | os.PathLike | None = None) -> Path | None:
        """The benchmark's data folder (`benchmark_data_dir`), None when its data ships with a package."""
        return benchmark_data_dir(self.name, data_dir) if self.uses_data_dir else None

    @abc.abstractmethod
    def prepare(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Prepared:
        """The items of `categories` (None = all) rendered and scored under `controls`."""

    @abc.abstractmethod
    def scores(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """One seed's verdict records -> per-category accuracy and the benchmark's aggregates."""

    @abc.abstractmethod
    def answers(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                ) -> Callable[[GenerationRequest], str]:
        """A `ScriptedBackend` policy answering every entry with its ground truth (expect 100%)."""

    def report_figures(self, summary: Mapping[str, Any], title: str) -> list[tuple[str, Any]]:
        """Figures of a run's summary beyond the category chart, as (name, matplotlib Figure) (none by
        default); the report saves each as a PNG beside it."""
        return []

    def subset_unit(self, entry_id: str, category: str) -> str:
        """The item `entry_id` belongs to for subsets and standard errors: what `scores` counts as one
        (an entry by default). `scores` must depend on a unit's category and verdicts, not on its id."""
        return entry_id


class ProvidesAceGold(abc.ABC):
    """Capability: single-turn entries whose correct answer is one list of calls (R2IF's ACE metric,
    `tooltune.evaluation.r2if_ace`, runs on them)."""

    @abc.abstractmethod
    def ace_gold(self, categories: Sequence[str] | str | None, controls: Controls, data_dir: Path | None
                 ) -> AceGold:
        """The entries of `categories` that ACE scores, with their correct calls and what is left out."""


class SimulatesUsers(abc.ABC):
    """Capability: entries played against a simulated user, prepared only when one is given (by the
    caller: `tooltune eval` builds it from its --user-* flags, or takes `scripted_user` with
    --scripted)."""

    user_categories: ClassVar[tuple[str, ...]]
    """The categories whose entries need a simulated user (skipped without one)."""

    @abc.abstractmethod
    def prepare_with_user(self, categories: Sequence[str] | str | None, controls: Controls,
                          data_dir: Path | None) -> Prepared:
        """`prepare`, the simulated-user entries included."""

    @abc.abstractmethod
    def scripted_user(self, data_dir: Path | None) -> Backend | None:
        """The user of the ground-truth self-check: a scripted backend that plays each simulated-user
        entry's user perfectly (None: no entries to play)."""


class MissingCapability(ConfigError):
    """A benchmark asked for something it does not have (ACE gold, a simulated user)."""


CapabilityT = TypeVar("CapabilityT")


def require(bench: Benchmark, capability: type[CapabilityT], what: str) -> CapabilityT:
    """`bench` as `capability`; MissingCapability naming the benchmark, `what` was asked for, and the
    benchmarks that have it, otherwise."""
    if isinstance(bench, capability):
        return bench
    able = [name for name, b in BENCHMARKS.items() if isinstance(b, capability)]
    raise MissingCapability(f"benchmark {bench.name!r} has no {what}; benchmarks with it: {', '.join(able)}")


def _load_builtins() -> None:
    for module in BENCHMARK_MODULES:
        importlib.import_module(module)


BENCHMARKS: Registry[Benchmark] = Registry("benchmark", loader=_load_builtins)
"""Every registered benchmark by name, in registration order (the built-ins load on the first lookup)."""


def register_benchmark(cls: type[Benchmark]) -> type[Benchmark]:
    """Class decorator: register one instance of `cls` under `cls.name` (a ValueError when another
    benchmark holds the name)."""
    BENCHMARKS.add(cls.name, cls())
    return cls
