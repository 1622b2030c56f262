"""A batch loader for data sets that fit in memory: the whole split lives on the training device."""

import math
from collections.abc import Callable, Iterator

import torch
from torch import Tensor
from torch.utils.data import DistributedSampler

BatchTransform = Callable[[Tensor, torch.Generator], Tensor]


class ResidentLoader:
    """Batches cut from uint8 tensors already on the device, transformed a whole batch at a time.

    The order comes from ``sampler``, a ``DistributedSampler``: the same shards, padding and
    per-epoch reshuffle (Lightning calls its ``set_epoch``) as a DataLoader with that sampler.

    Args:
        images: (N, C, H, W) uint8, on the device the batches are wanted on.
        labels: (N,) int64, on the same device.
        batch_size: samples per batch.
        sampler: yields the sample indices of this rank's epoch.
        transform: uint8 batch and a random generator to the float batch the model takes.
    """

    batch_sampler = None  # Lightning looks for a DataLoader's attributes: batches come from `sampler`

    def __init__(
        self,
        images: Tensor,
        labels: Tensor,
        batch_size: int,
        sampler: DistributedSampler,
        transform: BatchTransform,
    ) -> None:
        self.images, self.labels = images, labels
        self.batch_size, self.sampler, self.transform = batch_size, sampler, transform

    def __len__(self) -> int:
        return math.ceil(len(self.sampler) / self.batch_size)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        device = self.images.device
        order = torch.tensor(list(self.sampler), device=device)
        # Seeded by (seed, epoch, rank): an epoch's augmentation is the same when it is run again.
        s = self.sampler
        generator = torch.Generator(device).manual_seed(hash((s.seed, s.epoch, s.rank)) & (2**63 - 1))
        for batch in order.split(self.batch_size):
            yield self.transform(self.images[batch], generator), self.labels[batch]
