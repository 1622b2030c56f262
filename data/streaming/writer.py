"""``python -m app shard``: a DataModule's splits written as LitData shards, with the data card beside them.

Each sample is ``{"index", "label", "image"}``: its place in its split, its label and its image encoded
as a file: an image folder's JPEG or PNG bytes as read from disk, other data sets' uint8 pixels as
lossless PNG. The splits are the DataModule's own (its train/val split by ``--data.seed`` and
``--data.val_size``, or fold ``--data.fold`` of ``--data.folds``; ``test`` where it has one), in
``OUTPUT/train``, ``OUTPUT/val`` and ``OUTPUT/test``.
"""

import inspect
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_info
from PIL import Image

from data.contract import card, provided
from data.files import FULL
from data.streaming.store import FORMAT, SIDE_FILE, VERSION, Location, require_litdata
from data.vision import DataError

# Where LitData stages the chunks it uploads (its optimize has no argument for it).
STAGING = "DATA_OPTIMIZER_CACHE_FOLDER"
SKIPPED = {"root", "predict_dir", "num_workers", "download", "loader", "batch_size", "mean", "std"}


def encode(sample: tuple[int, int, str | np.ndarray]) -> dict[str, Any]:
    """One sample as LitData stores it (runs in the writer's worker processes)."""
    index, label, source = sample
    if isinstance(source, str):
        image = Path(source).read_bytes()
    else:
        out = io.BytesIO()
        Image.fromarray(source).save(out, format="PNG", compress_level=1)
        image = out.getvalue()
    return {"index": index, "label": label, "image": image}


def pixels(image: Any) -> np.ndarray:
    """A data set's image (PIL, tensor (C, H, W) or array (H, W[, C])) as uint8 (H, W) or (H, W, C)."""
    if isinstance(image, torch.Tensor):
        image = image.numpy().transpose(1, 2, 0) if image.ndim == 3 else image.numpy()
    array = np.asarray(image)
    if array.dtype != np.uint8:
        raise DataError(f"shard stores uint8 images; this data set gives {array.dtype}")
    return array[..., 0] if array.ndim == 3 and array.shape[-1] == 1 else array


def samples(split: Any) -> list[tuple[int, int, str | np.ndarray]]:
    """``(index, label, file or pixels)`` of each sample of a split (a data set's ``TransformedSubset``)."""
    dataset, indices = split.dataset, list(split.indices)
    files = getattr(dataset, "samples", None)  # torchvision's ImageFolder: (path, label)
    if files is not None:
        return [(i, int(files[k][1]), str(files[k][0])) for i, k in enumerate(indices)]
    data, targets = getattr(dataset, "data", None), getattr(dataset, "targets", None)
    if data is not None and targets is not None:  # MNIST and CIFAR: every image in one array
        return [(i, int(targets[k]), pixels(data[k])) for i, k in enumerate(indices)]
    found = []
    for i, k in enumerate(indices):
        image, label = dataset[k]
        found.append((i, int(label), pixels(image)))
    return found


def source(datamodule: Any) -> dict[str, Any]:
    """The DataModule's class and the arguments that shape its images, to rebuild its transforms."""
    kind = type(datamodule)
    arguments = {}
    for name in inspect.signature(kind.__init__).parameters:
        value = getattr(datamodule, name, None)
        if name in SKIPPED or name == "self" or value is None:
            continue
        try:
            arguments[name] = json.loads(json.dumps(value))
        except TypeError:
            continue  # not a plain value: left at its default
    if "grayscale" in inspect.signature(kind.__init__).parameters:
        arguments["grayscale"] = provided(datamodule, "in_channels") == 1
    return {"class_path": f"{kind.__module__}.{kind.__qualname__}", "init_args": arguments}


def splits(datamodule: Any) -> dict[str, Any]:
    """The DataModule's splits by name, read as its own ``setup`` reads them."""
    datamodule.setup("fit")
    found = {"train": datamodule.train_set, "val": datamodule.val_set}
    if provided(datamodule, "has_test_split", True):
        datamodule.setup("test")
        found["test"] = datamodule.test_set
    return found


def needed(found: dict[str, list[tuple[int, int, str | np.ndarray]]]) -> int:
    """Bytes the splits' images take as they are (files on disk, else raw pixels): shards' size, about."""
    return sum(os.path.getsize(x) if isinstance(x, str) else x.nbytes for s in found.values() for *_, x in s)


def no_room(folder: str, size: int) -> str | None:
    """Why ``folder`` (or, before it exists, the nearest folder above it) has no room for ``size`` bytes,
    at most a chunk (``strerror``), else None."""
    # LitData's writer processes report what stopped them only as text: ask the disk itself, with a file
    # of up to one default chunk (64 MB).
    there = next(path for path in (Path(folder), *Path(folder).parents) if path.is_dir())
    probe = there / f".room.{os.getpid()}"
    try:
        with open(probe, "wb") as f:
            f.write(bytes(min(size, 64 << 20)))
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        return err.strerror if err.errno in FULL else None
    finally:
        probe.unlink(missing_ok=True)
    return None


def no_room_error(output: str, why: str, size: int) -> DataError:
    return DataError(
        f"no room for the shards in {output} ({why}): they need about {size:,} bytes; free that much "
        "there, or pass another --output, and run shard again"
    )


def shard(
    datamodule: Any,
    output: str,
    workers: int | None = None,
    chunk_bytes: str = "64MB",
    chunk_size: int | None = None,
) -> str:
    """Write ``datamodule``'s splits as LitData shards to ``output`` (a folder or ``s3://bucket/prefix``).

    Refuses an output that already holds anything (no overwrite, no resume): delete it to write again.

    Args:
        datamodule: any DataModule here (its ``setup`` gives the splits).
        output: a folder, or ``s3://bucket/prefix`` (the bucket must exist).
        workers: writer processes; None: one a core.
        chunk_bytes: the size of a chunk (LitData's shard file), the unit that is downloaded.
        chunk_size: samples a chunk instead, if given.

    Returns:
        ``output``.
    """
    require_litdata()
    from litdata import optimize

    target = Location(output)
    target.check_writable()
    if not target.is_empty():
        raise DataError(
            f"{output} is not empty: shard writes only to a new or empty location (it never overwrites "
            "nor resumes); delete it or pass another --output"
        )
    found = {name: samples(split) for name, split in splits(datamodule).items()}
    side = {
        "format": FORMAT,
        "version": VERSION,
        "card": card(datamodule),
        "splits": {name: len(items) for name, items in found.items()},
        "source": source(datamodule),
    }
    # Asked before any shard is written: LitData's writer processes, stopped by a full disk, can wait on
    # each other for good (litdata 0.2.x).
    size = 0 if target.remote else needed(found)
    full = size and no_room(target.url, size)
    if full:
        raise no_room_error(output, full, size)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    # workaround: LitData stages every upload's chunks in one /tmp/chunks (0.2.76); gone when each has its own
    staging, before = tempfile.mkdtemp(prefix="shard-") if target.remote else None, os.environ.get(STAGING)
    if staging:  # (a local output is written in place)
        os.environ[STAGING] = staging  # its forked workers read it too
    try:
        for name, items in found.items():
            rank_zero_info(f"shard: {len(items)} {name} images to {target.join(name)}")
            optimize(
                fn=encode,
                inputs=items,
                output_dir=target.join(name),
                **({"chunk_size": chunk_size} if chunk_size else {"chunk_bytes": chunk_bytes}),
                num_workers=max(1, min(workers or cores, len(items))),
                reorder_files=False,
                keep_data_ordered=True,
                # The default, spawn, starts each worker with a fresh import of torch (seconds); and
                # LitData sets the start method for the whole process: fork keeps Linux's own.
                start_method="fork",
            )
        target.write_json(SIDE_FILE, side)
    except BaseException as err:
        full = isinstance(err, Exception) and size and no_room(target.url, size)
        target.remove()  # nothing half-written: a reader finds shards with their side file, or nothing
        if full:
            # Its frames go now, and with them LitData's progress bar, whose last line would follow ours.
            err.__traceback__ = None
            raise no_room_error(output, full, size) from None
        raise
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
            if before is None:
                del os.environ[STAGING]
            else:
                os.environ[STAGING] = before
    rank_zero_info(f"shard: wrote {sum(side['splits'].values())} images to {output}")
    return output
