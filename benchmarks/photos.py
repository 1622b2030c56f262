"""``python -m benchmarks.photos``: images/s that a photo folder's train loader delivers, no model.

A folder of photo-sized JPEGs (500x375, quality 90, crops of scikit-image's sample photos; written
once to a temporary folder) is read at 224 px and 64 px by three pipelines with the same threads
and workers:

- a: torchvision's reference: ``ImageFolder`` + PIL ``RandomResizedCrop``, flip, ``ToTensor``, ``Normalize``;
- b: ``ImageFolderDataModule --data.loader torch``: uint8 decoding (JPEG DCT scaling), v2 on tensors;
- c: ``ImageFolderDataModule --data.loader resident``: the folder decoded once (not timed here: the
  ``decode`` column), each image of a batch cropped and flipped on uint8.

Each loader runs ``--epochs`` epochs; img/s is the last epoch's (workers started, caches warm).
Needs the ``bench`` extra (scikit-image) for the photos.
"""

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from app.allocator import keep_freed_memory
from data import ImageFolderDataModule
from data.photos import IMAGENET_MEAN, IMAGENET_STD

SAMPLES = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field")


def write_photos(root: Path, classes: int, per_class: int, seed: int = 0) -> Path:
    """``root/train/class_k/*.jpg``: 500x375 crops of scikit-image's photos, rescaled at random."""
    from skimage import data as samples  # the `bench` extra

    sources = [Image.fromarray(getattr(samples, name)()).convert("RGB") for name in SAMPLES]
    rng = np.random.default_rng(seed)
    for k in range(classes):
        folder = root / "train" / f"class_{k}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            source = sources[rng.integers(len(sources))]
            scale = max(500 / source.width, 375 / source.height) * rng.uniform(1.0, 1.6)
            image = source.resize((round(source.width * scale), round(source.height * scale)))
            left, top = rng.integers(image.width - 499), rng.integers(image.height - 374)
            image.crop((left, top, left + 500, top + 375)).save(folder / f"{i:04d}.jpg", quality=90)
    return root


def reference(root: Path, size: int, batch: int, workers: int) -> DataLoader:
    """torchvision's ImageNet training pipeline, as its reference scripts and tutorials write it."""
    steps = [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), transforms.ToTensor()]
    folder = datasets.ImageFolder(
        root / "train", transforms.Compose([*steps, transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    )
    return DataLoader(folder, batch, shuffle=True, num_workers=workers, persistent_workers=workers > 0)


def ours(root: Path, size: int, batch: int, workers: int, loader: str) -> tuple[object, float]:
    """Our train loader, and the seconds its preparation (the resident copy's decoding) took."""
    dm = ImageFolderDataModule(
        str(root), size, batch_size=batch, num_workers=workers, val_size=1, loader=loader
    )
    start = time.perf_counter()
    dm.prepare_data()
    dm.setup("fit")
    train = dm.train_dataloader()
    if loader == "resident":
        dm.decoded(dm.train_set.dataset)
    return train, time.perf_counter() - start


def images_per_second(loader, epochs: int) -> float:
    """The last epoch's images per second, every batch taken to the float tensor a step would get."""
    for epoch in range(epochs):
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        start, seen = time.perf_counter(), 0
        for images, _ in loader:
            seen += len(images)
    return seen / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--images", type=int, default=640, help="photos in the folder (10 classes)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers of a and b")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every pipeline")
    parser.add_argument("--sizes", type=int, nargs="+", default=[224, 64])
    args = parser.parse_args()
    keep_freed_memory()  # the CLI's allocator setting, for every pipeline
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="photos-") as tmp:
        root = write_photos(Path(tmp), 10, args.images // 10)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(
            f"{args.images} JPEGs 500x375 q90, batch {args.batch_size}, {args.workers} workers (a, b), "
            f"{args.threads} torch threads, {cores} cores, {platform.processor() or platform.machine()}, "
            f"torch {torch.__version__}\n"
        )
        columns = ["size", "a: torchvision reference", "b: ours, decoded per epoch", "c: ours, resident"]
        print("| " + " | ".join([*columns, "decode once (c)", "b/a", "c/a"]) + " |")
        print("|---" * 7 + "|")
        for size in args.sizes:
            a = images_per_second(reference(root, size, args.batch_size, args.workers), args.epochs)
            b = images_per_second(ours(root, size, args.batch_size, args.workers, "torch")[0], args.epochs)
            resident, decode = ours(root, size, args.batch_size, args.workers, "resident")
            c = images_per_second(resident, args.epochs)
            cells = [f"{size} px", f"{a:.0f} img/s", f"{b:.0f} img/s", f"{c:.0f} img/s", f"{decode:.1f} s"]
            print("| " + " | ".join([*cells, f"{b / a:.2f}", f"{c / a:.1f}"]) + " |", flush=True)


if __name__ == "__main__":
    main()
