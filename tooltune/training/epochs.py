"""Epochs that shrink: a per-epoch prompt subset sampler and a learning-rate shape by training progress.

With online pre-rollout filtering an epoch covers only the prompts not yet skipped, so the number of
optimizer steps per epoch falls as training goes on. The LR schedule is therefore a function of
progress through the planned epochs (epoch index + fraction of the current, shrunken epoch), which
ends exactly at the last step whatever the filter removed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.utils.data import Sampler


class FilteredRepeatSampler(Sampler):
    """TRL's RepeatSampler over a prompt subset that is frozen per epoch.

    The permutation depends only on (seed, epoch), so a resumed run replays the same order and the
    Trainer's batch skipping lands on the same prompts.
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
        self.indices: list[int] = list(range(num_prompts))

    def set_prompts(self, epoch: int, indices: list[int]) -> None:
        self.epoch, self.indices = epoch, sorted(indices)

    def epoch_order(self) -> list[int]:
        if not self.shuffle:
            return list(self.indices)
        g = torch.Generator()
        g.manual_seed(self.seed * 100_003 + self.epoch)
        return [self.indices[i] for i in torch.randperm(len(self.indices), generator=g).tolist()]

    def __iter__(self):
        order = self.epoch_order()
        usable = len(order) // self.batch_size * self.batch_size
        for start in range(0, usable, self.batch_size):
            chunk = order[start : start + self.batch_size]
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        usable = len(self.indices) // self.batch_size * self.batch_size
        return usable * self.mini_repeat_count * self.repeat_count


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
