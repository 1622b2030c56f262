"""A batch loader for data sets that fit in memory: the whole split lives on the training device."""

import math
from collections.abc import Callable, Iterator

import torch
from torch import Tensor
from torch.utils.data import DistributedSampler

# (all the images, the batch's indices among them, a random generator) to the float batch the model takes.
BatchTransform = Callable[[Tensor, Tensor, torch.Generator], Tensor]


class ResidentLoader:
    """Batches of uint8 images already on the device, transformed a whole batch at a time.

    The order comes from ``sampler``, a ``DistributedSampler``: the same shards, padding and
    per-epoch reshuffle (Lightning calls its ``set_epoch``) as a DataLoader with that sampler.

    Args:
        images: (N, C, H, W) uint8, on the device the batches are wanted on.
        labels: (N,) int64, on the same device.
        batch_size: samples per batch.
        sampler: yields the sample indices of this rank's epoch.
        transform: the images, the batch's indices and a random generator to the float batch
            the model takes (cutting the batch out is the transform's: a crop reads only its box).
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
        self.epoch, self.served, self.resume_at = 0, 0, 0

    def __len__(self) -> int:
        return math.ceil(len(self.sampler) / self.batch_size)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        device = self.images.device
        s = self.sampler
        start = self.resume_at if s.epoch == self.epoch else 0
        self.epoch, self.served, self.resume_at = s.epoch, start, 0
        order = torch.tensor(list(s), device=device)
        draws = getattr(self.transform, "draws", True)  # a transform without randomness needs no generator
        for i, batch in enumerate(order.split(self.batch_size)[start:], start):
            # Seeded by (seed, epoch, rank, batch): a batch's augmentation is the same when it is run
            # again, also after a resume that skips the batches before it.
            seed = hash((s.seed, s.epoch, s.rank, i)) & (2**63 - 1)
            generator = torch.Generator(device).manual_seed(seed) if draws else None
            self.served = i + 1
            yield self.transform(self.images, batch, generator), self.labels[batch]

    def state_dict(self) -> dict[str, int]:
        """Where this epoch stands; Lightning stores it in checkpoints for a mid-epoch resume."""
        # Lightning fetches no batch ahead from a loader with a length: every batch served is trained on.
        return {"epoch": self.epoch, "trained": self.served}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Make the next pass over ``state``'s epoch start at its first untrained batch."""
        self.epoch, self.resume_at = state["epoch"], state["trained"]


def standardized(scale: Tensor, shift: Tensor) -> BatchTransform:
    """The batch's images as normalized floats, ``x * scale + shift``: the transform of a split
    without augmentation (see :func:`data.batch_transforms.standardization`)."""

    def transform(images: Tensor, batch: Tensor, generator: torch.Generator | None) -> Tensor:
        return images[batch].to(torch.float32).mul_(scale).add_(shift)  # a copy: indexing makes one

    transform.draws = False
    return transform
