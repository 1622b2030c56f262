"""A data set's training augmentation, declared once as torchvision v2 transforms, run by both loaders.

A DataModule declares it in ``augmentation()``: v2 transforms of a uint8 image (C, H, W), in order.
The DataLoader path applies them to each image in its workers (``train_transform``). The resident
loader runs them here on whole uint8 batches, each image drawing its own randomness from the batch's
generator; the transforms in :func:`batch_step` have batch kernels (:mod:`data.batch_transforms`),
with v2's distributions (tested against it), and any other transform runs image by image.
"""

import functools
from collections.abc import Callable, Sequence

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from torchvision.transforms import v2

from data.batch_transforms import (
    each,
    random_crop,
    random_flip,
    random_resized_crop,
    standardization,
    standardize,
)
from data.resident import BatchTransform, standardized

# A transform of a uint8 batch (N, C, H, W) drawing from a generator.
BatchStep = Callable[[Tensor, torch.Generator], Tensor]


def has_batch_kernel(transform: Callable) -> bool:
    """Whether :func:`batch_step` runs ``transform`` on the whole batch at once, not image by image."""
    kind = type(transform)
    return (
        kind in (v2.RandomHorizontalFlip, v2.RandomVerticalFlip)
        or (kind is v2.RandomCrop and zero_padded(transform))
        or fast_resized_crop(transform)
    )


def batch_step(transform: Callable) -> BatchStep:
    """``transform`` on a uint8 batch, each image its own draw: a batch kernel for v2's flips,
    ``RandomCrop`` (constant zero padding) and ``RandomResizedCrop`` (bilinear, antialiased, default
    aspect range); else ``transform`` applied to each image. Subclasses run image by image (they may
    draw or transform otherwise)."""
    kind = type(transform)
    if kind is v2.RandomHorizontalFlip:
        return functools.partial(random_flip, p=transform.p)
    if kind is v2.RandomVerticalFlip:
        return functools.partial(random_flip, p=transform.p, dim=-2)
    if kind is v2.RandomCrop and zero_padded(transform):
        return lambda images, generator: random_crop(
            images, transform.padding or 0, generator, tuple(transform.size)
        )
    if fast_resized_crop(transform):
        return lambda images, generator: random_resized_crop(
            images, tuple(transform.size), transform.scale, generator
        )
    return lambda images, generator: each(images, transform, generator)


def zero_padded(crop: v2.RandomCrop) -> bool:
    """Whether a v2 ``RandomCrop`` pads as :func:`random_crop` does: zeros, and not small images more."""
    return crop.padding_mode == "constant" and crop.fill == 0 and not crop.pad_if_needed


def fast_resized_crop(transform: Callable) -> bool:
    """Whether ``transform`` is a v2 ``RandomResizedCrop`` that :func:`random_resized_crop` reproduces."""
    return (
        type(transform) is v2.RandomResizedCrop  # its default interpolation is the str "bilinear"
        and transform.interpolation in (v2.InterpolationMode.BILINEAR, "bilinear")
        and transform.antialias
        and tuple(transform.ratio) == (3 / 4, 4 / 3)
    )


def resident_transform(transforms: Sequence[Callable], mean: Tensor, std: Tensor) -> BatchTransform:
    """The resident loader's transform of a batch: its images picked from the resident ones,
    augmented by ``transforms`` (a data set's ``augmentation()``; none for evaluation), normalized.

    A leading ``RandomResizedCrop`` reads each image's box in place, with a following left-right
    flip of p 1/2 done per crop; with nothing after them it writes normalized floats directly.
    """
    steps = list(transforms.transforms if isinstance(transforms, v2.Compose) else transforms)
    crop = steps.pop(0) if steps and fast_resized_crop(steps[0]) else None
    after = steps[0] if steps else None
    flip = crop is not None and type(after) is v2.RandomHorizontalFlip and after.p == 0.5
    if flip:
        steps.pop(0)
    rest = [batch_step(t) for t in steps]
    slow = [type(t).__name__ for t in steps if not has_batch_kernel(t)]
    if slow:
        rank_zero_info(
            f"resident loader: {', '.join(slow)} run image by image (3-8x slower than a batch kernel); "
            "the flips, RandomCrop and RandomResizedCrop run on whole batches"
        )
    scale, shift = standardization(mean, std)
    if crop is None and not rest:
        return standardized(scale, shift)

    def transform(images: Tensor, batch: Tensor, generator: torch.Generator) -> Tensor:
        if crop is None:
            out = images[batch]
        else:
            size, into = tuple(crop.size), None if rest else (mean, std)
            out = random_resized_crop(images, size, crop.scale, generator, flip, batch, into)
            if not rest:
                return out
        for step in rest:
            out = step(out, generator)
        return standardize(out, scale, shift)

    transform.draws = crop is not None or bool(rest)  # else the loader makes no generator for it
    return transform
