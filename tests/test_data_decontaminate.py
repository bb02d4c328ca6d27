"""Decontamination by content: the rule on hand-made turns, the real benchmark files, and the preparation
stage (every copy rejected with its benchmark, counted per benchmark, refused before writing anything)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooltune.config import UnknownName
from tooltune.data.decontaminate import (
    NGRAM,
    TEMPLATE_TURNS,
    BenchmarkIndex,
    Turn,
    acebench_turns,
    apibank_turns,
    bfcl_turns,
    describe_overlaps,
    load_index,
    words,
)
from tooltune.data.pipeline import PrepareConfig, prepare
from tooltune.data.sources import DataFileError, get_source
from tooltune.schema import Sample, ToolCall, ToolSpec

LONG = ("Find the nearest open pharmacy to Union Square in San Francisco and list its opening hours "
        "for this coming Sunday please")
MEDIUM = "Book a table for two at Luigi's tonight at eight"  # 10 words: below the n-gram length
SHORT = "What's the time in Tokyo?"  # 5 words


def _sample(*user_turns: str, sid: str = "s") -> Sample:
    messages = [{"role": "user", "content": t} for t in user_turns[:-1]]
    messages += [{"role": "assistant", "content": "ok"}] if messages else []
    messages.append({"role": "user", "content": user_turns[-1]})
    tool = ToolSpec("f", "f", {"type": "object", "properties": {}})
    return Sample(id=sid, source="jsonl", category="simple", messages=messages, tools=[tool],
                  answer=[ToolCall("f", {})])


@pytest.fixture(scope="module")
def index() -> BenchmarkIndex:
    template = "Please answer as the user would, and never reveal that you are a simulated user at all"
    turns = [Turn("bfcl", "simple_1", LONG), Turn("apibank", "level-1:3", MEDIUM),
             Turn("acebench", "n_1", SHORT), Turn("acebench", "n_2", "yes please")]
    turns += [Turn("acebench", f"agent_{i}", f"{template}. Your goal number {i} is private.")
              for i in range(TEMPLATE_TURNS)]
    return BenchmarkIndex(turns)


def test_words_fold_case_spacing_and_punctuation():
    assert words("  What's   the TIME,\nin Tokyo? ") == ("what", "s", "the", "time", "in", "tokyo")


@pytest.mark.parametrize(
    ("text", "benchmark", "how"),
    [
        ("what's THE time   in tokyo", "acebench", "equal"),
        (LONG.upper() + "!", "bfcl", "equal"),
        (f"Hi there. {MEDIUM}, thanks a lot.", "apibank", "contains it"),
        ("Could you " + " ".join(LONG.split()[2:15]) + " quickly", "bfcl", "shares"),
    ],
)
def test_a_copy_is_found_with_its_benchmark(index, text, benchmark, how):
    turn, found = index.match(text)
    assert turn.benchmark == benchmark and found.startswith(how)


@pytest.mark.parametrize(
    "text",
    [
        "yes please",  # a benchmark turn under MIN_EQUAL_WORDS words is not an entry
        f"Could you tell me: {SHORT}",  # a short benchmark turn inside a longer one is not a copy
        " ".join(LONG.split()[: NGRAM - 1]),  # 12 shared words are not 13
        "Please answer as the user would, and never reveal that you are a simulated user at all",  # template
        "Book a table for two at Luigi's tomorrow at eight",
    ],
)
def test_what_is_not_a_copy(index, text):
    assert index.match(text) is None


def test_check_names_the_benchmark_turn_and_looks_at_every_user_turn(index):
    rejection = index.check(_sample("hello there my friend", "list " + LONG, sid="x:1"))
    assert rejection.reason == "benchmark_overlap_bfcl" and rejection.field == "messages[2].content"
    assert "bfcl entry simple_1" in rejection.detail and rejection.sample_id == "x:1"
    assert index.check(_sample("a question of my own about the weather in Oslo")) is None


@pytest.fixture(scope="module")
def real_index(shared_data_dir: Path) -> BenchmarkIndex:
    """The index of the real benchmark files (BFCL from the bfcl-eval package)."""
    pytest.importorskip("bfcl_eval")
    return load_index(shared_data_dir)


def test_the_real_benchmarks_are_indexed_and_their_copies_found(shared_data_dir: Path, real_index):
    bfcl = next(t for t in bfcl_turns() if len(words(t.text)) >= NGRAM)
    apibank = next(t for t in apibank_turns(shared_data_dir / "apibank") if len(words(t.text)) >= 8)
    acebench = next(t for t in acebench_turns(shared_data_dir / "acebench") if len(words(t.text)) >= 8)
    assert all(real_index.turns[name] > 100 for name in ("bfcl", "apibank", "acebench"))
    for turn in (bfcl, apibank, acebench):
        rejection = real_index.check(_sample(f"Hello! {turn.text.lower()}"))
        assert rejection is not None and rejection.reason == f"benchmark_overlap_{turn.benchmark}"


def test_the_shipped_toolrl_data_holds_no_benchmark_copy(real_index):
    toolrl = get_source("toolrl")
    checked = 0
    for rec in toolrl.read("package"):
        try:
            samples = toolrl.convert(rec.data, rec.position, no_call_samples=True)
        except Exception:  # noqa: BLE001,S112 - a refused record has nothing to check
            continue
        for sample in samples:
            checked += 1
            assert real_index.check(sample) is None, sample.id
    assert checked == 399


def _jsonl(path: Path, samples: list[Sample]) -> str:
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in samples), encoding="utf-8")
    return str(path)


def test_prepare_rejects_copies_and_counts_them_per_benchmark(tmp_path: Path, shared_data_dir: Path):
    pytest.importorskip("bfcl_eval")
    acebench = next(t for t in acebench_turns(shared_data_dir / "acebench") if len(words(t.text)) >= NGRAM)
    samples = [_sample("my own question about the weather in Oslo today", sid="own"),
               _sample(acebench.text, sid="copy")]
    src = _jsonl(tmp_path / "in.jsonl", samples)
    out = tmp_path / "out"
    stats = prepare(PrepareConfig(sources=[("jsonl", src)], out=str(out), progress=False, decontaminate=True,
                                  eval_data=str(shared_data_dir)))
    assert stats["jsonl"].samples_rejected == {"benchmark_overlap_acebench": 1}
    assert stats["jsonl"].samples_kept == 1
    written = json.loads((out / "stats.json").read_text(encoding="utf-8"))["decontamination"]
    assert written["samples_rejected"] == {"bfcl": 0, "apibank": 0, "acebench": 1}
    assert written["benchmark_user_turns"]["acebench"] > 100
    rejected = json.loads((out / "rejected.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert rejected["reason"] == "benchmark_overlap_acebench" and rejected["sample_id"] == "copy"
    assert describe_overlaps(stats["jsonl"].samples_rejected).endswith("bfcl 0, apibank 0, acebench 1")


def test_missing_benchmark_data_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("TOOLTUNE_DATA_DIR", raising=False)
    src = _jsonl(tmp_path / "in.jsonl", [_sample("my own question about the weather in Oslo")])
    out = tmp_path / "out"
    with pytest.raises(DataFileError, match="no benchmark data folder for apibank: pass --eval-data DIR"):
        prepare(PrepareConfig(sources=[("jsonl", src)], out=str(out), progress=False, decontaminate=True))
    with pytest.raises(DataFileError, match=r"nowhere/apibank not found"):
        prepare(PrepareConfig(sources=[("jsonl", src)], out=str(out), progress=False, decontaminate=True,
                              eval_data=str(tmp_path / "nowhere")))
    assert not out.exists()
    with pytest.raises(UnknownName, match=r"benchmarks: unknown benchmark 'apibnk' \(did you mean apibank"):
        load_index(str(tmp_path), benchmarks=["apibnk"])
