"""``python -m benchmarks.augment``: the resident loader's declared augmentation against hand-written batches.

Each row is one data set's augmentation, run over a resident epoch of random uint8 images
(``ResidentLoader``, as the DataModules build it) three ways, in turn, ``--rounds`` times:

- before: hand-written batch functions, as a DataModule's own ``augment`` would run them;
- after: the data set's one declaration, ``augmentation()`` (v2 transforms), run by ``data.augment``;
- per image: the same v2 transforms applied to each image of the batch (the design not taken).

"same batches": whether before and after make the same first batch from the same seed. Figures are
images per second of the process's CPU time (one torch thread by default: on a shared
machine, wall-clock figures move with its load), medians of the rounds; ratios against ``before``.
"""

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor
from torch.utils.data import DistributedSampler
from torchvision.transforms import v2

from app.process import keep_freed_memory
from benchmarks.__main__ import cpu_name
from benchmarks.common import count
from data import CIFAR10DataModule, FashionMNISTDataModule
from data.augment import resident_transform
from data.batch_transforms import each, normalize, random_flip, random_resized_crop
from data.resident import BatchTransform, ResidentLoader

MEAN, STD = torch.tensor([0.5, 0.45, 0.4]), torch.tensor([0.25, 0.25, 0.25])


def random_crop_before(images: Tensor, padding: int, generator: torch.Generator) -> Tensor:
    """A hand-written padded random crop of a batch (data.batch_transforms.random_crop without v2's sizes)."""
    n, c, h, w = images.shape
    padded = torch.nn.functional.pad(images, (padding,) * 4)
    dy, dx = torch.randint(0, 2 * padding + 1, (2, n, 1), device=images.device, generator=generator)
    rows = (torch.arange(h, device=images.device) + dy).view(n, 1, h, 1)
    cols = (torch.arange(w, device=images.device) + dx).view(n, 1, 1, w)
    batch = torch.arange(n, device=images.device).view(n, 1, 1, 1)
    channel = torch.arange(c, device=images.device).view(1, c, 1, 1)
    return padded[batch, channel, rows, cols]


def rows(images: int, photos: int) -> list[tuple[str, Tensor, int, list[Callable], BatchTransform]]:
    """(name, resident images, batch size, declared augmentation, the transform used before) per row."""

    def cifar(x: Tensor, batch: Tensor, g: torch.Generator) -> Tensor:
        return normalize(random_flip(random_crop_before(x[batch], 4, g), g), MEAN, STD)

    def fashion(x: Tensor, batch: Tensor, g: torch.Generator) -> Tensor:
        return normalize(random_flip(x[batch], g), MEAN[:1], STD[:1])

    found = [
        (
            "CIFAR-10: crop (padding 4) + flip, 32 px, batch 128",
            torch.randint(0, 256, (images, 3, 32, 32), dtype=torch.uint8),
            128,
            CIFAR10DataModule().augmentation(),
            cifar,
        ),
        (
            "Fashion-MNIST --data.flip true, 28 px, batch 128",
            torch.randint(0, 256, (images, 1, 28, 28), dtype=torch.uint8),
            128,
            FashionMNISTDataModule(flip=True).augmentation(),
            fashion,
        ),
    ]
    try:
        from data.image_folder import ImageFolderDataModule  # an optional part
    except ImportError:
        return found
    for side, size in ((256, 224), (73, 64)):

        def photo(x: Tensor, batch: Tensor, g: torch.Generator, size: int = size) -> Tensor:
            return random_resized_crop(x, size, (0.08, 1.0), g, True, batch, (MEAN, STD))

        resident = torch.randint(0, 256, (photos, 3, side, side), dtype=torch.uint8)
        found.append(
            (
                f"photos: random-resized crop {side} to {size} px + flip, batch 32",
                resident.contiguous(memory_format=torch.channels_last),
                32,
                ImageFolderDataModule(image_size=size).augmentation(),
                photo,
            )
        )
    return found


def per_image(transforms: list[Callable], mean: Tensor, std: Tensor) -> BatchTransform:
    """The declared v2 transforms applied to each image of the batch in turn."""
    compose = v2.Compose(transforms)

    def transform(images: Tensor, batch: Tensor, generator: torch.Generator) -> Tensor:
        return normalize(each(images[batch], compose, generator), mean, std)

    return transform


def images_per_second(images: Tensor, batch_size: int, transform: BatchTransform) -> float:
    """One resident epoch's training images per second of CPU time."""
    loader = ResidentLoader(
        images,
        torch.zeros(len(images), dtype=torch.long),
        batch_size,
        DistributedSampler(images, 1, 0),
        transform,
    )
    start = time.process_time()
    for _ in loader:
        pass
    return len(images) / (time.process_time() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--images", type=int, default=10000, help="resident images of the 32 and 28 px rows")
    parser.add_argument("--photos", type=int, default=512, help="resident images of the photo rows")
    parser.add_argument("--rounds", type=count, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    keep_freed_memory()  # the CLI's allocator setting
    torch.set_num_threads(args.threads)
    print(
        f"{cpu_name()}, {os.cpu_count()} cores, {args.threads} torch threads, {platform.machine()}, "
        f"torch {torch.__version__}; img/s of CPU time, medians of {args.rounds} rounds\n"
    )
    columns = ["augmentation", "before", "after (declared once)", "after/before", "same batches"]
    print("| " + " | ".join([*columns, "per image (v2)", "per image/before"]) + " |")
    print("|---" * (len(columns) + 2) + "|")
    for name, images, batch_size, declared, before in rows(args.images, args.photos):
        mean, std = MEAN[: images.shape[1]], STD[: images.shape[1]]
        ways = {
            "before": before,
            "after": resident_transform(declared, mean, std),
            "per image": per_image(declared, mean, std),
        }
        figures: dict[str, list[float]] = {way: [] for way in ways}
        for round in range(args.rounds + 1):  # the first one warms up, untimed
            for way, transform in ways.items():
                figure = images_per_second(images, batch_size, transform)
                figures[way] += [figure] if round else []
        b, a, p = (statistics.median(figures[way]) for way in ways)
        batch = torch.arange(batch_size)
        same = torch.equal(
            *(ways[way](images, batch, torch.Generator().manual_seed(0)) for way in ("before", "after"))
        )
        cells = f"{b:.0f} | {a:.0f} | {a / b:.2f} | {'yes' if same else 'no'} | {p:.0f} | {p / b:.2f}"
        print(f"| {name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
