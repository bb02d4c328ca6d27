"""Epochs that shrink: per-epoch samplers with a replayable order and a learning-rate shape by progress.

With online pre-rollout filtering an epoch covers only the prompts not yet skipped, so the number of
optimizer steps per epoch falls as training goes on. The LR schedule is therefore a function of
progress through the planned epochs (epoch index + fraction of the current, shrunken epoch), which
ends exactly at the last step whatever the filter removed.

Both samplers compute an epoch's order from (seed, epoch) when the epoch starts, so there is no sampler
state for a checkpoint to miss: a resumed run, mid-epoch or at an epoch boundary, replays the order of
the uninterrupted run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import Sampler


class EpochRepeatSampler(Sampler):
    """TRL's RepeatSampler (each prompt `mini_repeat_count` times in a row, each batch of `batch_size`
    prompts `repeat_count` times, the incomplete last batch dropped) with a replayable epoch order.

    TRL's sampler draws one permutation per epoch from a generator that advances from epoch to epoch and
    is saved nowhere, so a run resumed after epoch 0 would start its epoch from epoch 0's order. Here
    epoch e's order is the (e + 1)-th permutation drawn from a generator seeded with `seed`, redrawn from
    the seed when the epoch starts: TRL's own sequence, as a function of (seed, epoch). The trainer (and
    accelerate's data loader) call `set_epoch` before each epoch.
    """

    def __init__(
        self,
        num_prompts: int,
        mini_repeat_count: int,
        batch_size: int,
        repeat_count: int,
        shuffle: bool = True,
        seed: int = 0,
    ) -> None:
        self.num_prompts = num_prompts
        self.mini_repeat_count = mini_repeat_count
        self.batch_size = batch_size
        self.repeat_count = repeat_count
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def epoch_order(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.num_prompts))
        g = torch.Generator()
        g.manual_seed(self.seed)
        for _ in range(self.epoch):  # the permutations of the earlier epochs, as TRL's generator drew them
            torch.randperm(self.num_prompts, generator=g)
        return torch.randperm(self.num_prompts, generator=g).tolist()

    def batches(self) -> list[list[int]]:
        """This epoch's prompt batches, in order."""
        order = self.epoch_order()
        usable = len(order) // self.batch_size * self.batch_size
        return [order[start : start + self.batch_size] for start in range(0, usable, self.batch_size)]

    def num_batches(self) -> int:
        return self.num_prompts // self.batch_size

    def __iter__(self) -> Iterator[int]:
        for batch in self.batches():
            for _ in range(self.repeat_count):
                for index in batch:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        return self.num_batches() * self.batch_size * self.mini_repeat_count * self.repeat_count


class FilteredRepeatSampler(EpochRepeatSampler):
    """An `EpochRepeatSampler` over a prompt subset that is frozen per epoch (`set_prompts`).

    The permutation of the subset depends only on (seed, epoch). As in TRL, prompts that do not fill a
    last batch wait for a later epoch's order; but when fewer prompts are left than one batch holds,
    the epoch is one batch that repeats them (cycling through the permutation), so training goes on as
    long as any prompt is left. An empty subset gives an empty epoch.
    """

    def __init__(self, num_prompts: int, *args: Any, **kwargs: Any) -> None:
        """The parent's arguments; every prompt is in the subset until `set_prompts` says otherwise."""
        super().__init__(num_prompts, *args, **kwargs)
        self.indices: list[int] = list(range(num_prompts))

    def set_prompts(self, epoch: int, indices: list[int]) -> None:
        self.epoch, self.indices = epoch, sorted(indices)

    def epoch_order(self) -> list[int]:
        if not self.shuffle:
            return list(self.indices)
        g = torch.Generator()
        g.manual_seed(self.seed * 100_003 + self.epoch)
        return [self.indices[i] for i in torch.randperm(len(self.indices), generator=g).tolist()]

    def batches(self) -> list[list[int]]:
        if 0 < len(self.indices) < self.batch_size:
            order = self.epoch_order()
            return [[order[i % len(order)] for i in range(self.batch_size)]]
        return super().batches()

    def num_batches(self) -> int:
        if 0 < len(self.indices) < self.batch_size:
            return 1
        return len(self.indices) // self.batch_size


def progress_schedule(kind: str, warmup: float = 0.0) -> Callable[[float], float]:
    """LR multiplier as a function of training progress p in [0, 1] (warmup is a share of progress)."""
    if kind not in ("linear", "cosine", "constant", "constant_with_warmup"):
        raise ValueError(f"lr schedule {kind!r}: expected linear, cosine, constant or constant_with_warmup")

    def factor(p: float) -> float:
        if warmup and p < warmup:
            return p / warmup
        if kind in ("constant", "constant_with_warmup"):
            return 1.0
        q = min(1.0, (p - warmup) / max(1e-12, 1.0 - warmup))
        return max(0.0, 1.0 - q) if kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * q))

    return factor
