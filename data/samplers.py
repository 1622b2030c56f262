"""The training orders: distributed samplers whose global order depends only on the seed and the epoch."""

import math
from collections.abc import Iterator

import torch
from torch import Tensor
from torch.utils.data import Dataset, DistributedSampler


class EpochSampler(DistributedSampler):
    """A ``DistributedSampler`` that yields ``(epoch, index)``, for per-sample seeded augmentation."""

    def __iter__(self) -> Iterator[tuple[int, int]]:
        epoch = self.epoch
        return ((epoch, i) for i in super().__iter__())


class BalancedSampler(DistributedSampler):
    """A ``DistributedSampler`` whose epoch is a class-balanced draw, with replacement.

    Each epoch draws as many samples as there are, every class equally likely (a sample of a
    class of ``c`` samples with weight ``1 / c``), seeded by ``seed`` and the epoch only: the
    global order depends neither on the number of processes nor on the epochs run before (a
    resumed run draws what an uninterrupted one does). It is padded and split into shards as
    ``DistributedSampler`` does (rank r of n takes every n-th).
    ``shuffle=False`` draws the same epoch every time.

    Args:
        dataset: the samples; only its length is read.
        num_replicas: processes the epoch is shared between.
        rank: this process's place among them.
        shuffle: draw anew each epoch.
        seed: seed of the draws.
        labels: the class of each sample of ``dataset``.
    """

    # torch's WeightedRandomSampler is not distributed, and wrapped in Lightning's
    # DistributedSamplerWrapper it draws from a generator that advances with each epoch a process
    # runs: a run resumed at epoch k would not draw the epoch k of an uninterrupted one.

    def __init__(
        self,
        dataset: Dataset,
        num_replicas: int,
        rank: int,
        shuffle: bool = True,
        seed: int = 0,
        *,
        labels: Tensor,
    ) -> None:
        super().__init__(dataset, num_replicas, rank, shuffle=shuffle, seed=seed)
        self.weights = 1 / torch.bincount(labels).double()[labels]

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + (self.epoch if self.shuffle else 0))
        drawn = torch.multinomial(self.weights, len(self.weights), replacement=True, generator=generator)
        order = drawn.tolist() * math.ceil(self.total_size / len(drawn))
        return iter(order[: self.total_size][self.rank :: self.num_replicas])


class BalancedEpochSampler(EpochSampler, BalancedSampler):
    """A :class:`BalancedSampler` that yields ``(epoch, index)``, as :class:`EpochSampler` does."""
