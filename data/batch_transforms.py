"""Transforms of whole uint8 batches (N, C, H, W) on their device: one kernel per batch, not per image."""

from collections.abc import Callable

import torch
from torch import Tensor


def normalize(images: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """uint8 images (or floats on that 0-255 scale) scaled to [0, 1], then standardized per channel."""
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


def random_resized_crop(
    images: Tensor, size: int, scale: tuple[float, float], generator: torch.Generator
) -> Tensor:
    """Each image cut to its own random box (area ``scale`` of it, aspect 3/4 to 4/3), resized to ``size``.

    Returns floats on the 0-255 scale of ``images`` (rounding back to uint8 would cost as much as
    the crop): :func:`normalize` and :func:`random_flip` take them. kornia draws a box per image
    (torchvision's v2 draws one for the whole batch) but from torch's global generator: it draws
    here from one seeded from ``generator``, the global one left as it was.
    """
    from kornia.augmentation import RandomResizedCrop  # imported on first use: kornia takes ~1 s

    crop = RandomResizedCrop((size, size), scale=scale, align_corners=False)
    seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
    cuda = [images.device] if images.device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        return crop(images.float())


def each(images: Tensor, transform: Callable[[Tensor], Tensor], generator: torch.Generator) -> Tensor:
    """``transform``, which draws from torch's global generator, applied to each uint8 image on its
    own, drawing from a generator seeded from ``generator`` (torchvision's policies take one image)."""
    seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
    cuda = [images.device] if images.device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        return torch.stack([transform(image) for image in images])
