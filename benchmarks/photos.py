"""``python -m benchmarks.photos``: images/s that a photo folder's train loader delivers.

A folder of photo-sized JPEGs (500x375 or ``--photo-size``, quality 90, crops of scikit-image's
sample photos; written once to a temporary folder) is read at 224 px and 64 px by three pipelines
with the same threads and workers:

- a: torchvision's reference: ``ImageFolder`` + PIL ``RandomResizedCrop``, flip, ``ToTensor``, ``Normalize``;
- b: ``ImageFolderDataModule --data.loader torch``: uint8 decoding (torchcodec, or PIL's DCT
  scaling), v2 on tensors, uint8 batches normalized after the transfer, as Lightning runs it;
- c: ``ImageFolderDataModule --data.loader resident``: the folder decoded once (not timed here: the
  ``decode`` column), each image of a batch cropped and flipped on uint8.

Each loader runs ``--epochs`` epochs; img/s is the last epoch's (workers started, caches warm), the
median of ``--rounds`` rounds (a shared machine's speed drifts between runs: the ratios hold better).
``--device cuda`` delivers the batches to the GPU (a and b through pinned memory, c resident there);
``--train`` also times torchvision's ResNet-18 training on each pipeline's batches. Needs the
``bench`` extra (scikit-image) for the photos.
"""

import argparse
import logging
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torchvision
from lightning import Trainer
from PIL import Image
from torch import Tensor
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from app.process import keep_freed_memory
from benchmarks.common import count, now
from data import ImageFolderDataModule
from data.image_folder.photos import IMAGENET_MEAN, IMAGENET_STD

SAMPLES = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field")


def write_photos(root: Path, classes: int, per_class: int, size: tuple[int, int] = (500, 375)) -> Path:
    """``root/train/class_k/*.jpg``: ``size`` crops of scikit-image's photos, rescaled at random."""
    from skimage import data as samples  # the `bench` extra

    sources = [Image.fromarray(getattr(samples, name)()).convert("RGB") for name in SAMPLES]
    rng, (width, height) = np.random.default_rng(0), size
    for k in range(classes):
        folder = root / "train" / f"class_{k}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            source = sources[rng.integers(len(sources))]
            scale = max(width / source.width, height / source.height) * rng.uniform(1.0, 1.6)
            image = source.resize((round(source.width * scale), round(source.height * scale)))
            left, top = rng.integers(image.width - width + 1), rng.integers(image.height - height + 1)
            image.crop((left, top, left + width, top + height)).save(folder / f"{i:04d}.jpg", quality=90)
    return root


def reference(root: Path, size: int, batch: int, workers: int, device: torch.device) -> DataLoader:
    """torchvision's ImageNet training pipeline, as its reference scripts and tutorials write it."""
    steps = [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), transforms.ToTensor()]
    folder = datasets.ImageFolder(
        root / "train", transforms.Compose([*steps, transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    )
    pin = device.type == "cuda"
    return DataLoader(
        folder, batch, shuffle=True, num_workers=workers, persistent_workers=workers > 0, pin_memory=pin
    )


def ours(
    root: Path, size: int, batch: int, workers: int, loader: str, device: torch.device
) -> tuple[object, Callable, float]:
    """Our train loader, what Lightning does with its batches on the device (the DataModule's
    ``on_after_batch_transfer``), and the seconds its preparation (the resident copy's decoding) took."""
    dm = ImageFolderDataModule(
        str(root), size, batch_size=batch, num_workers=workers, val_size=1, loader=loader
    )
    # The device comes from a Trainer, as in a run: the resident copy goes there.
    dm.trainer = Trainer(accelerator=device.type, devices=1, logger=False, enable_progress_bar=False)
    start = time.perf_counter()
    dm.prepare_data()
    dm.setup("fit")
    train = dm.train_dataloader()
    if loader == "resident":
        dm.decoded(dm.train_set.dataset)
    return train, dm.on_after_batch_transfer, time.perf_counter() - start


def resnet18_step(device: torch.device) -> Callable[[Tensor, Tensor], None]:
    """One SGD step of torchvision's ResNet-18 on a batch: channels last, bf16 autocast on a GPU."""
    model = torchvision.models.resnet18(num_classes=10).to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(images: Tensor, labels: Tensor) -> None:
        with torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda"):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def images_per_second(
    loader, epochs: int, device: torch.device, step: Callable | None = None, on_device: Callable | None = None
) -> float:
    """The last epoch's images per second: every batch taken to the float tensor on ``device`` a
    step would get (by ``on_device`` once there, if given), and given to ``step`` if there is one."""
    for epoch in range(epochs):
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        start, seen = now(device), 0
        for images, labels in loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            if on_device is not None:
                images, labels = on_device((images, labels), 0)
            if step is not None:
                step(images, labels)
            seen += len(images)
    return seen / (now(device) - start)


def pipelines(root: Path, size: int, args: argparse.Namespace) -> dict[str, float]:
    """img/s of a, b, c at ``size`` (with ``--train``, also of ResNet-18 trained on each), each the
    median of ``--rounds`` rounds that run a, b, c in turn; c's first decoding."""
    device = torch.device(args.device)
    runs: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for train in [False, True] if args.train else [False]:
            step = resnet18_step(device) if train else None
            suffix = " train" if train else ""
            batches = args.batch_size, args.workers
            a = images_per_second(reference(root, size, *batches, device), args.epochs, device, step)
            b, on_device, _ = ours(root, size, *batches, "torch", device)
            b = images_per_second(b, args.epochs, device, step, on_device)
            c, on_device, decode = ours(root, size, *batches, "resident", device)
            runs.setdefault("decode", [decode])  # the first time: later ones read the cached copy
            c = images_per_second(c, args.epochs, device, step, on_device)
            for name, figure in zip("abc", (a, b, c), strict=True):
                runs.setdefault(name + suffix, []).append(figure)
    return {name: statistics.median(figures) for name, figures in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--images", type=int, default=640, help="photos in the folder (10 classes)")
    parser.add_argument(
        "--photo-size", default="500x375", help="WIDTHxHEIGHT of the JPEGs (4032x3024: a phone's)"
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=count, default=1, help="a, b, c in turn; medians reported")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers of a and b")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every pipeline")
    parser.add_argument("--sizes", type=int, nargs="+", default=[224, 64])
    parser.add_argument(
        "--device", default="cpu", help="where batches are delivered (and trained on): cpu, cuda"
    )
    parser.add_argument("--train", action="store_true", help="also time ResNet-18 training on each pipeline")
    args = parser.parse_args()
    keep_freed_memory()  # the CLI's allocator setting, for every pipeline
    torch.set_num_threads(args.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # the Trainers' device lines
    with tempfile.TemporaryDirectory(prefix="photos-") as tmp:
        width, height = map(int, args.photo_size.split("x"))
        root = write_photos(Path(tmp), 10, args.images // 10, (width, height))
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        gpu = f", {torch.cuda.get_device_name()}" if args.device == "cuda" else ""
        print(
            f"{args.images} JPEGs {width}x{height} q90, batch {args.batch_size}, "
            f"{args.workers} workers (a, b), "
            f"{args.threads} torch threads, {cores} cores, {platform.processor() or platform.machine()}"
            f"{gpu}, batches on {args.device}, torch {torch.__version__}, "
            f"medians of {args.rounds} round(s) of {args.epochs} epochs\n"
        )
        columns = ["size", "a: torchvision reference", "b: ours, decoded per epoch", "c: ours, resident"]
        columns += ["decode once (c)", "b/a", "c/a"]
        columns += ["ResNet-18 training: a", "b", "c", "c/a"] if args.train else []
        print("| " + " | ".join(columns) + " |")
        print("|---" * len(columns) + "|")
        for size in args.sizes:
            f = pipelines(root, size, args)
            cells = [f"{size} px", *(f"{f[k]:.0f} img/s" for k in "abc"), f"{f['decode']:.1f} s"]
            cells += [f"{f['b'] / f['a']:.2f}", f"{f['c'] / f['a']:.1f}"]
            if args.train:
                cells += [
                    *(f"{f[k + ' train']:.0f} img/s" for k in "abc"),
                    f"{f['c train'] / f['a train']:.2f}",
                ]
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
