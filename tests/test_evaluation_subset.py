"""Subsets of a benchmark: a seeded, order-free choice of at most N units per category, or an id list;
multi-turn dialogues stay whole; what the run records about its subset."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tooltune.config import ConfigError
from tooltune.evaluation.benchmark import BENCHMARKS, Prepared, Task
from tooltune.evaluation.subset import SubsetSpec, describe_subset, select
from tooltune.evaluation.verdict import Verdict


def _task(entry_id: str, category: str) -> Task:
    return Task(entry_id, category, [{"role": "user", "content": entry_id}],
                lambda text, i=entry_id, c=category: Verdict(i, c, bool(text)))


def _prepared(counts: dict[str, int], shuffle_seed: int | None = None) -> Prepared:
    tasks = [_task(f"{c}_{i}", c) for c, n in counts.items() for i in range(n)]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(tasks)
    return Prepared(tasks, ["data.json"])


def _entry(entry_id: str, category: str) -> str:
    return entry_id


def _ids(prep: Prepared) -> set[str]:
    return {t.id for t in prep.tasks}


def test_the_same_seed_picks_the_same_entries_whatever_their_order() -> None:
    counts = {"simple": 40, "multiple": 30, "tiny": 3}
    first, record = select(_prepared(counts), SubsetSpec(5, seed=0), _entry)
    shuffled, again = select(_prepared(counts, shuffle_seed=7), SubsetSpec(5, seed=0), _entry)
    assert _ids(first) == _ids(shuffled) and record == again
    other, _ = select(_prepared(counts), SubsetSpec(5, seed=1), _entry)
    assert _ids(other) != _ids(first)


def test_each_category_gets_at_most_n_units_and_small_ones_are_kept_whole() -> None:
    chosen, record = select(_prepared({"simple": 40, "multiple": 30, "tiny": 3}), SubsetSpec(5, 2), _entry)
    per_category = {c: sum(1 for t in chosen.tasks if t.category == c)
                    for c in ("simple", "multiple", "tiny")}
    assert per_category == {"simple": 5, "multiple": 5, "tiny": 3}
    assert record["categories"]["simple"] == {"units": 5, "available": 40, "entries": 5}
    assert record["units"] == record["entries"] == 13
    assert record["per_category"] == 5 and record["seed"] == 2
    line = describe_subset(record)
    assert line.startswith("subset: at most 5 per category, seed 2; 13 units, 13 entries")
    assert "simple 5/40" in line and "tiny 3/3" in line
    assert describe_subset(None) == "all entries"


def test_growing_a_category_keeps_the_entries_already_chosen_unless_a_new_one_ranks_higher() -> None:
    small, _ = select(_prepared({"simple": 50}), SubsetSpec(10, 0), _entry)
    large, _ = select(_prepared({"simple": 60}), SubsetSpec(10, 0), _entry)
    new = _ids(large) - _ids(small)
    assert all(int(i.split("_")[1]) >= 50 for i in new)  # only added entries can displace chosen ones


def test_an_id_list_selects_entries_and_refuses_unknown_ids_in_one_line(tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("# chosen by hand\nsimple_3\n\nmultiple_7\nsimple_3\n")
    chosen, record = select(_prepared({"simple": 10, "multiple": 10}), SubsetSpec(ids_file=str(ids)), _entry)
    assert _ids(chosen) == {"simple_3", "multiple_7"}
    assert record["ids_file"] == "ids.txt" and len(record["ids_sha256"]) == 64
    assert "ids from ids.txt" in describe_subset(record)
    ids.write_text("simple_3\nsimple_99\nparallel_0\n")
    with pytest.raises(ConfigError) as err:
        select(_prepared({"simple": 10}), SubsetSpec(ids_file=str(ids)), _entry)
    message = str(err.value)
    assert "\n" not in message and "2 id(s)" in message and "simple_99, parallel_0" in message
    assert str(ids) in message


def test_bad_subset_settings_are_refused_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not both"):
        SubsetSpec(5, ids_file="ids.txt")
    with pytest.raises(ConfigError, match="subset_ids: .* is not a file"):
        SubsetSpec(ids_file=str(tmp_path / "missing.txt")).ids()
    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    with pytest.raises(ConfigError, match="names no id"):
        SubsetSpec(ids_file=str(tmp_path / "empty.txt")).ids()
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8"):
        SubsetSpec(ids_file=str(tmp_path / "binary.txt")).ids()


def test_an_acebench_dialogue_is_chosen_or_left_out_whole(tmp_path: Path) -> None:
    unit = BENCHMARKS["acebench"].subset_unit
    category = "normal_multi_turn_user_adjust"
    tasks = [_task(f"{category}_{d}_{turn}", category) for d in range(6) for turn in range(3)]
    chosen, record = select(Prepared(tasks, []), SubsetSpec(2, 0), unit)
    dialogues = {t.id.rsplit("_", 1)[0] for t in chosen.tasks}
    assert len(dialogues) == 2 and len(chosen.tasks) == 6
    assert record["categories"][category] == {"units": 2, "available": 6, "entries": 6}
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{category}_4\n")  # a dialogue's id names all its turns
    whole, _ = select(Prepared(tasks, []), SubsetSpec(ids_file=str(ids)), unit)
    assert _ids(whole) == {f"{category}_4_{turn}" for turn in range(3)}
