"""Keep benchmark entries out of training data, by content: a sample whose user turns repeat a user turn
of BFCL, API-Bank or ACEBench is rejected, whatever its source calls it.

The rule (one user turn of the training sample against one user turn of a benchmark; both normalised:
lowercase, whitespace folded, compared as their runs of letters and digits, so punctuation and spacing
do not hide a copy):

- **equal**: the two turns are the same words, and the benchmark turn has at least `MIN_EQUAL_WORDS`
  words ("yes, please" is not a benchmark entry);
- **contained**: the benchmark turn, of at least `MIN_CONTAINED_WORDS` words, appears whole inside the
  training turn (a copy with a greeting or a role header around it);
- **overlapping**: the two share a run of `NGRAM` consecutive words (the 13-gram overlap of GPT-3's
  decontamination), not counting runs that occur in `TEMPLATE_TURNS` or more different turns of that
  benchmark: those are its fixed instructions (ACEBench's simulated-user preamble), not an entry's content.

Benchmark user turns: BFCL's `question` user messages (every file of the bfcl-eval package, live and
multi-turn included), API-Bank's `User:` lines of `level-*-api.json` and the `User` turns of its
dialogue files, ACEBench's `user:` lines (an agent entry's simulated-user instruction as a whole).
A rejection's reason is `benchmark_overlap_<benchmark>`, so the preparation statistics count each
benchmark separately; the detail names the benchmark entry and the shared words.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune.config import Registry
from tooltune.data.sources import DataFileError, Rejection
from tooltune.data.sources import acebench as acebench_source
from tooltune.data.sources import apibank as apibank_source
from tooltune.data.sources import bfcl as bfcl_source
from tooltune.data.sources.base import describe
from tooltune.data.sources.reading import iter_file
from tooltune.schema import Sample

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "TOOLTUNE_DATA_DIR"
"""The folder holding apibank/ and acebench/ when no --eval-data is given (as for `tooltune eval`)."""
NGRAM = 13
MIN_EQUAL_WORDS = 4
MIN_CONTAINED_WORDS = 8
TEMPLATE_TURNS = 10
REASON_PREFIX = "benchmark_overlap_"

_WORD = re.compile(r"\w+")
_USER_LINE = re.compile(r"(?m)^\s*(?:User|user):[ \t]*(.+)$")


def words(text: str) -> tuple[str, ...]:
    """The normalised words of `text`: lowercase runs of letters and digits."""
    return tuple(_WORD.findall(text.lower()))


@dataclass(frozen=True)
class Turn:
    """One benchmark user turn: its benchmark, the entry it belongs to and its text."""

    benchmark: str
    entry: str
    text: str


class BenchmarkIndex:
    """The user turns of some benchmarks, indexed for the three checks of the module's rule."""

    def __init__(
        self, turns: Iterable[Turn], ngram: int = NGRAM, template_turns: int = TEMPLATE_TURNS
    ) -> None:
        self.ngram = ngram
        self.equal: dict[tuple[str, ...], Turn] = {}
        self.contained: dict[int, dict[tuple[str, ...], Turn]] = {}
        self.grams: dict[tuple[str, ...], Turn] = {}
        self.turns: Counter[str] = Counter()
        spread: Counter[tuple[str, tuple[str, ...]]] = Counter()
        first: dict[tuple[str, tuple[str, ...]], Turn] = {}
        for turn in turns:
            w = words(turn.text)
            if not w:
                continue
            self.turns[turn.benchmark] += 1
            if len(w) >= MIN_EQUAL_WORDS:
                self.equal.setdefault(w, turn)
            if MIN_CONTAINED_WORDS <= len(w) < ngram:  # longer turns are found by their n-grams
                self.contained.setdefault(len(w), {}).setdefault(w, turn)
            for gram in {w[i : i + ngram] for i in range(len(w) - ngram + 1)}:
                spread[(turn.benchmark, gram)] += 1
                first.setdefault((turn.benchmark, gram), turn)
        for (benchmark, gram), count in spread.items():
            if count < template_turns:
                self.grams.setdefault(gram, first[(benchmark, gram)])

    def match(self, text: str) -> tuple[Turn, str] | None:
        """The benchmark turn `text` copies and how (equal, contained, the shared words), or None."""
        w = words(text)
        hit = self.equal.get(w)
        if hit is not None:
            return hit, "equal"
        for length, table in self.contained.items():
            for i in range(len(w) - length + 1):
                hit = table.get(w[i : i + length])
                if hit is not None:
                    return hit, "contains it"
        for i in range(len(w) - self.ngram + 1):
            hit = self.grams.get(w[i : i + self.ngram])
            if hit is not None:
                return hit, f"shares {' '.join(w[i : i + self.ngram])!r}"
        return None

    def check(self, sample: Sample) -> Rejection | None:
        """A Rejection (`benchmark_overlap_<benchmark>`) when a user turn of `sample` copies one of the
        index's benchmark turns; None otherwise."""
        for i, message in enumerate(sample.messages):
            if message.get("role") != "user" or not isinstance(message.get("content"), str):
                continue
            found = self.match(message["content"])
            if found is not None:
                turn, how = found
                detail = f"{how} of {turn.benchmark} entry {turn.entry}: {turn.text[:120]!r}"
                reason = f"{REASON_PREFIX}{turn.benchmark}"
                return Rejection(reason, f"messages[{i}].content", detail, sample.id)
        return None


def _text_user_turns(text: str) -> list[str]:
    return [m.group(1).strip() for m in _USER_LINE.finditer(text)]


def bfcl_turns(spec: str | None = None) -> Iterator[Turn]:
    """BFCL's user messages (every entry file of `spec`: None for the bfcl-eval package data)."""
    for rec in bfcl_source.read(spec or "package", lenient=True):
        entry = rec.data.get("entry") if isinstance(rec.data, Mapping) else None
        if not isinstance(entry, Mapping):
            continue
        where = f"{entry.get('id', describe(rec.position))}"
        for text in _role_user_texts(entry.get("question"), "content"):
            yield Turn("bfcl", where, text)


def _role_user_texts(value: Any, key: str, depth: int = 0) -> Iterator[str]:
    """Texts under `key` of the {"role": "user"} objects nested in lists in `value`."""
    if depth > 4:
        return
    if isinstance(value, list):
        for item in value:
            yield from _role_user_texts(item, key, depth + 1)
    elif isinstance(value, Mapping) and str(value.get("role", "")).lower() == "user" \
            and isinstance(value.get(key), str):
        yield value[key]


def apibank_turns(folder: Path) -> Iterator[Turn]:
    """API-Bank's `User:` lines of `level-*-api.json` and `User` turns of `lv1-lv2-samples/**.jsonl`."""
    for path in sorted(folder.glob("level-*-api.json")):
        for rec in apibank_source.read(str(path), lenient=True):
            if isinstance(rec.data, Mapping) and isinstance(rec.data.get("input"), str):
                for text in _text_user_turns(rec.data["input"]):
                    yield Turn("apibank", describe(rec.position), text)
    for path in sorted(folder.glob("lv1-lv2-samples/**/*.jsonl")):
        for rec in iter_file(str(path), lenient=True):
            for text in _role_user_texts(rec.data, "text"):
                yield Turn("apibank", f"{path.name}:{rec.position.get('line')}", text)


def acebench_turns(folder: Path) -> Iterator[Turn]:
    """ACEBench's `user:` lines; an entry without any (agent: the simulated user's brief) as a whole."""
    for rec in acebench_source.read(str(folder), lenient=True):
        entry = rec.data.get("entry") if isinstance(rec.data, Mapping) else None
        if not isinstance(entry, Mapping) or not isinstance(entry.get("question"), str):
            continue
        where = str(entry.get("id", describe(rec.position)))
        for text in _text_user_turns(entry["question"]) or [entry["question"]]:
            yield Turn("acebench", where, text)


def benchmark_folder(benchmark: str, eval_data: str | os.PathLike | None) -> Path:
    """`<eval_data>/<benchmark>`, else `$TOOLTUNE_DATA_DIR/<benchmark>`; DataFileError naming both."""
    root = eval_data or os.environ.get(DATA_DIR_ENV)
    how = f"pass --eval-data DIR or set {DATA_DIR_ENV} to the folder holding {benchmark}/"
    if not root:
        raise DataFileError(f"decontaminate: no benchmark data folder for {benchmark}: {how}")
    folder = Path(root) / benchmark
    if not folder.is_dir():
        raise DataFileError(f"decontaminate: {folder} not found: {how}")
    return folder


TurnReader = Callable[[str | os.PathLike | None, str | None], Iterator[Turn]]
BENCHMARK_TURNS: Registry[TurnReader] = Registry("benchmark", key="benchmarks")
"""The benchmarks samples are checked against: each reads its user turns from (eval_data, bfcl_data)."""
BENCHMARK_TURNS.add("bfcl", lambda eval_data, bfcl_data: bfcl_turns(bfcl_data))
BENCHMARK_TURNS.add("apibank", lambda eval_data, _: apibank_turns(benchmark_folder("apibank", eval_data)))
BENCHMARK_TURNS.add("acebench", lambda eval_data, _: acebench_turns(benchmark_folder("acebench", eval_data)))


def load_index(eval_data: str | os.PathLike | None = None, benchmarks: Iterable[str] = BENCHMARK_TURNS,
               bfcl_data: str | None = None) -> BenchmarkIndex:
    """The index of every user turn of `benchmarks` (BFCL from the bfcl-eval package or `bfcl_data`,
    the others from `eval_data` or $TOOLTUNE_DATA_DIR). DataFileError when one cannot be found."""
    sources = [BENCHMARK_TURNS[name](eval_data, bfcl_data) for name in benchmarks]
    index = BenchmarkIndex(turn for source in sources for turn in source)
    for name in benchmarks:
        if not index.turns[name]:
            raise DataFileError(f"decontaminate: no {name} user turn found; is its data folder complete?")
    logger.info("decontamination index: %s user turns", dict(index.turns))
    return index


def overlap_counts(rejected: Mapping[str, int],
                   benchmarks: Iterable[str] = BENCHMARK_TURNS) -> dict[str, int]:
    """Samples rejected per benchmark, from the preparation's rejection counts by reason."""
    return {name: int(rejected.get(f"{REASON_PREFIX}{name}", 0)) for name in benchmarks}


def describe_overlaps(rejected: Mapping[str, int]) -> str:
    """One line for the command line: the samples rejected as copies of each benchmark."""
    counts = ", ".join(f"{name} {n}" for name, n in overlap_counts(rejected).items())
    return f"decontaminated by content against BFCL, API-Bank and ACEBench: samples rejected: {counts}"
