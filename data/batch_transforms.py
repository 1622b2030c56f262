"""Transforms of whole uint8 batches (N, C, H, W) on their device: one kernel per batch, not per image."""

import torch
from torch import Tensor


def normalize(images: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """uint8 images to float, scaled to [0, 1], then standardized per channel."""
    return (images.float() / 255 - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)


def random_flip(images: Tensor, generator: torch.Generator) -> Tensor:
    """Each image mirrored left-right with probability 1/2."""
    flip = torch.rand(len(images), device=images.device, generator=generator) < 0.5
    return torch.where(flip.view(-1, 1, 1, 1), images.flip(-1), images)


def random_crop(images: Tensor, padding: int, generator: torch.Generator) -> Tensor:
    """Each image zero-padded by ``padding`` and cropped back to its size at a random offset."""
    n, c, h, w = images.shape
    padded = torch.nn.functional.pad(images, (padding,) * 4)
    dy, dx = torch.randint(0, 2 * padding + 1, (2, n, 1), device=images.device, generator=generator)
    rows = (torch.arange(h, device=images.device) + dy).view(n, 1, h, 1)
    cols = (torch.arange(w, device=images.device) + dx).view(n, 1, 1, w)
    batch = torch.arange(n, device=images.device).view(n, 1, 1, 1)
    channel = torch.arange(c, device=images.device).view(1, c, 1, 1)
    return padded[batch, channel, rows, cols]
