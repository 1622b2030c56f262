"""Transforms of whole uint8 batches (N, C, H, W) on their device, each image drawing its own randomness."""

import functools
import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor
from torch.nn.functional import interpolate


@functools.lru_cache(maxsize=32)
def per_channel(values: tuple[float, ...], device: torch.device) -> Tensor:
    """``values`` as a tensor on ``device``, made once: a copy to a GPU each batch would wait for it."""
    return torch.tensor(values, device=device)


def normalize(images: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """uint8 images to float, scaled to [0, 1], then standardized per channel; (N, C, H, W) in memory."""
    return standardize(images, *standardization(mean, std))


def standardize(images: Tensor, scale: Tensor, shift: Tensor) -> Tensor:
    """:func:`normalize` with its :func:`standardization` made once, by a loader, not each batch."""
    out = images.to(torch.float32, memory_format=torch.contiguous_format, copy=True)
    return out.mul_(scale).add_(shift)  # ToDtype's and Normalize's work in three passes


def standardization(mean: Tensor, std: Tensor) -> tuple[Tensor, Tensor]:
    """Scale and shift (1, C, 1, 1) that take uint8 values x to (x / 255 - mean) / std."""
    return (1 / (255 * std)).view(1, -1, 1, 1), (-mean / std).view(1, -1, 1, 1)


def random_flip(images: Tensor, generator: torch.Generator, p: float = 0.5, dim: int = -1) -> Tensor:
    """Each image mirrored with probability ``p``: left-right (``dim`` -1) or upside down (-2)."""
    flip = torch.rand(len(images), device=images.device, generator=generator) < p
    return torch.where(flip.view(-1, 1, 1, 1), images.flip(dim), images)


def random_crop(
    images: Tensor,
    padding: int | Sequence[int],
    generator: torch.Generator,
    size: tuple[int, int] | None = None,
) -> Tensor:
    """Each image zero-padded by ``padding`` (all sides, or left, top, right, bottom as v2 takes it)
    and cropped to ``size`` (default: its own) at a random offset, as v2's ``RandomCrop``."""
    n, c = images.shape[:2]
    left, top, right, bottom = [padding] * 4 if isinstance(padding, int) else padding
    padded = torch.nn.functional.pad(images, (left, right, top, bottom))
    h, w = size or images.shape[-2:]
    spans = (padded.shape[-2] - h + 1, padded.shape[-1] - w + 1)
    dy, dx = (torch.randint(0, s, (n, 1), device=images.device, generator=generator) for s in spans)
    rows = (torch.arange(h, device=images.device) + dy).view(n, 1, h, 1)
    cols = (torch.arange(w, device=images.device) + dx).view(n, 1, 1, w)
    batch = torch.arange(n, device=images.device).view(n, 1, 1, 1)
    channel = torch.arange(c, device=images.device).view(1, c, 1, 1)
    return padded[batch, channel, rows, cols]


def crop_boxes(
    n: int, height: int, width: int, scale: tuple[float, float], generator: torch.Generator, tries: int = 10
) -> list[list[int]]:
    """``n`` boxes (top, left, height, width) drawn as torchvision's ``RandomResizedCrop.get_params``
    draws one: area ``scale`` of the image, aspect 3/4 to 4/3, the first of ``tries`` draws that fits,
    else the centre of the whole image. The batch's numbers come from one call (get_params takes
    a call and the global generator per image; a tensor op per step cost 0.5 ms a batch of 32)."""
    low, high = math.log(3 / 4), math.log(4 / 3)
    draws = torch.rand(n, tries + 1, 2, device=generator.device, generator=generator).tolist()
    boxes = []
    for image in draws:
        for u, v in image[:tries]:
            area = height * width * (scale[0] + u * (scale[1] - scale[0]))
            aspect = math.exp(low + v * (high - low))
            w, h = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
            if 0 < w <= width and 0 < h <= height:
                u, v = image[tries]  # the box's place, uniform over the positions where it fits
                boxes.append([math.floor(u * (height - h + 1)), math.floor(v * (width - w + 1)), h, w])
                break
        else:
            boxes.append(whole_centre(height, width))
    return boxes


def whole_centre(height: int, width: int) -> list[int]:
    """The box get_params falls back to: the whole image, its aspect brought within 3/4 to 4/3, centred."""
    if width / height < 3 / 4:
        w, h = width, round(width * 4 / 3)
    elif width / height > 4 / 3:
        w, h = round(height * 4 / 3), height
    else:
        w, h = width, height
    return [(height - h) // 2, (width - w) // 2, h, w]


def resize(image: Tensor, size: int | tuple[int, int]) -> Tensor:
    """A (1, C, H, W) uint8 image resized to ``size`` (a side, or height and width), bilinear with
    antialiasing."""
    size = (size, size) if isinstance(size, int) else tuple(size)
    if image.device.type == "cpu":  # torch's uint8 kernel: fastest on channels-last images
        return interpolate(image, size=size, mode="bilinear", antialias=True)
    # Its CUDA kernels take floats only.
    resized = interpolate(image.float(), size=size, mode="bilinear", antialias=True)
    return resized.round_().clamp_(0, 255).to(torch.uint8)


def random_resized_crop(
    images: Tensor,
    size: int | tuple[int, int],
    scale: tuple[float, float],
    generator: torch.Generator,
    flip: bool = False,
    picks: Tensor | None = None,
    standardize: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """Each uint8 image cut to its own random box (see :func:`crop_boxes`) and resized to ``size`` (a
    side, or height and width): torchvision's ``RandomResizedCrop`` per image, drawing from ``generator``.

    Args:
        flip: then mirror each crop left-right with probability 1/2 (cheaper than the whole batch).
        picks: the images to crop, by index (default: all); read in place, the batch is not copied.
        standardize: (mean, std): return the floats :func:`normalize` would; on the CPU each image
            is converted while it is in cache. Else uint8 crops.

    v2's transform draws one box for a whole batch. kornia's draws one per image but works in float:
    64 channels-last images of 256 px to 224 px took 65 ms there against 10 ms for this uint8 loop
    (one CPU thread), whose crops are views of the images.
    """
    if standardize is not None and images.device.type != "cpu":  # one batched op beats kernels per image
        return normalize(random_resized_crop(images, size, scale, generator, flip, picks), *standardize)
    rows = range(len(images)) if picks is None else picks.tolist()
    n, (c, height, width), device = len(rows), images.shape[1:], images.device
    boxes = crop_boxes(n, height, width, scale, generator)
    mirror = (torch.rand(n, device=device, generator=generator) < 0.5).tolist() if flip else [False] * n
    dtype = torch.uint8 if standardize is None else torch.float32
    out = torch.empty(n, c, *((size, size) if isinstance(size, int) else size), dtype=dtype, device=device)
    if standardize is not None:
        factor, shift = (t[0] for t in standardization(*standardize))
    for k, (row, (top, left, h, w), mirrored) in enumerate(zip(rows, boxes, mirror, strict=True)):
        resized = resize(images[row : row + 1, :, top : top + h, left : left + w], size)[0]
        resized = resized.flip(-1) if mirrored else resized
        if standardize is None:
            out[k].copy_(resized)
        else:
            out[k].copy_(resized).mul_(factor).add_(shift)
    return out


def each(images: Tensor, transform: Callable[[Tensor], Tensor], generator: torch.Generator) -> Tensor:
    """``transform``, which draws from torch's global generator, applied to each uint8 image on its
    own, drawing from a generator seeded from ``generator`` (torchvision's policies take one image)."""
    seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
    cuda = [images.device] if images.device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        return torch.stack([transform(image) for image in images])
