"""Batch-dict row selection, padding and trimming; the shrinking-epoch sampler and LR shape."""

from __future__ import annotations

import pytest
import torch

from tooltune.training.batch import padding_rows, select_rows, trim_padding
from tooltune.training.epochs import FilteredRepeatSampler, progress_schedule


def test_padding_rows_make_equal_micro_batches() -> None:
    assert padding_rows([0, 1, 4, 5], rows=8, chunks=2) == []
    assert padding_rows([0, 1, 4], rows=8, chunks=2) == [2]  # first dropped row fills the gap
    assert padding_rows([], rows=8, chunks=2) == [0, 1]  # every micro-batch needs a row
    assert padding_rows([5], rows=8, chunks=4) == [0, 1, 2]


def test_select_rows_indexes_every_per_row_entry_and_trims() -> None:
    batch = {
        "prompt_ids": torch.tensor([[0, 7, 8], [9, 9, 9], [0, 0, 5]]),
        "prompt_mask": torch.tensor([[0, 1, 1], [1, 1, 1], [0, 0, 1]]),
        "completion_ids": torch.tensor([[1, 2, 0, 0], [3, 4, 5, 6], [7, 0, 0, 0]]),
        "completion_mask": torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]),
        "advantages": torch.tensor([1.0, 2.0, 3.0]),
        "num_items_in_batch": torch.tensor(7),
        "num_images": [1, 2, 3],
    }
    out = select_rows(batch, [2, 0], rows=3)
    assert out["advantages"].tolist() == [3.0, 1.0] and out["num_images"] == [3, 1]
    assert out["num_items_in_batch"].item() == 7
    trim_padding(out)
    # completion: the widest kept row has 2 tokens; prompt: column 0 is padding in both kept rows
    assert out["completion_ids"].tolist() == [[7, 0], [1, 2]]
    assert out["prompt_ids"].tolist() == [[0, 5], [7, 8]] and out["prompt_mask"].tolist() == [[0, 1], [1, 1]]


def test_filtered_sampler_repeats_groups_and_is_deterministic_per_epoch() -> None:
    s = FilteredRepeatSampler(num_prompts=6, mini_repeat_count=2, batch_size=2, repeat_count=1, seed=3)
    s.set_prompts(0, [5, 1, 3])
    got = list(s)
    assert len(got) == len(s) == 4  # 3 prompts -> one full batch of 2 prompts x 2 rollouts
    assert got[0] == got[1] and got[2] == got[3] and set(got) <= {1, 3, 5}
    assert list(s) == got  # same epoch -> same order (a resumed run replays it)
    s.set_prompts(1, [1, 3, 5])
    assert len(list(s)) == 4


def test_progress_schedule_shapes() -> None:
    lin = progress_schedule("linear")
    assert (lin(0.0), lin(0.5), lin(1.0)) == (1.0, 0.5, 0.0)
    cos = progress_schedule("cosine", warmup=0.2)
    assert (
        cos(0.1) == pytest.approx(0.5) and cos(0.2) == pytest.approx(1.0) and cos(1.0) == pytest.approx(0.0)
    )
    assert progress_schedule("constant")(0.9) == 1.0
    with pytest.raises(ValueError, match="expected linear"):
        progress_schedule("polynomial")
