"""A folder of photos decoded once into one uint8 tensor, kept on disk beside the photos.

The copy is named after a hash of the files' paths, sizes and modification times, so a changed
folder gets a new copy (the stale one is deleted). It is written to a temporary file and renamed,
so a reader finds a whole copy or none; Lightning runs ``prepare_data``, which builds it, on one
process per node while the others wait.
"""

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from torchvision.transforms.v2 import functional as F

from data.image_folder.photos import read_photo

FORMAT = 2  # bump when what is stored changes (2: photos turned upright by their EXIF orientation)
SHARE_OF_MEMORY = 0.25  # `auto` keeps a folder resident when its decoded copy takes less than this


def decode_square(path: str, side: int, grey: bool) -> Tensor:
    """The photo at ``path``, its short side resized to ``side``, centre-cropped to a square."""
    image = F.resize(read_photo(path, side, grey), side, antialias=True)
    return F.center_crop(image, side)


def cache_file(root: str, split: str, samples: list[tuple[str, int]], side: int, grey: bool) -> Path:
    """Where the decoded copy of ``samples`` at ``side`` px lives: ``ROOT/.cache/decoded-...pt``."""
    digest = hashlib.sha256(f"{FORMAT} {side} {grey}\n".encode())
    for path, label in samples:
        stat = os.stat(path)
        digest.update(f"{path}\0{label}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    mode = "grey" if grey else "rgb"
    return Path(root, ".cache", f"decoded-{split}-{side}-{mode}-{digest.hexdigest()[:16]}.pt")


def decoded_bytes(samples: int, side: int, grey: bool) -> int:
    return samples * (1 if grey else 3) * side * side


def available_memory() -> int:
    """Bytes of RAM the OS can give without swapping (``MemAvailable``), else the free pages."""
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def fits(size: int, device: torch.device) -> bool:
    """Whether ``size`` bytes stay under :data:`SHARE_OF_MEMORY` of free RAM (and device memory)."""
    free = available_memory()
    if device.type == "cuda":
        free = min(free, torch.cuda.mem_get_info(device)[0])
    return size < SHARE_OF_MEMORY * free


def build(samples: list[tuple[str, int]], side: int, grey: bool) -> Tensor:
    """Decode every photo to a ``side`` px square, in threads (PIL and torch release the GIL)."""
    # A normal tensor even under validate's inference mode, which the pool's threads are not in.
    with torch.inference_mode(False):
        images = torch.empty(len(samples), 1 if grey else 3, side, side, dtype=torch.uint8)

    def one(i: int) -> None:
        images[i] = decode_square(samples[i][0], side, grey)

    with ThreadPoolExecutor(
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    ) as pool:
        list(pool.map(one, range(len(samples))))
    return images


def prepare(root: str, split: str, samples: list[tuple[str, int]], side: int, grey: bool) -> Path:
    """The decoded copy's file, built and written (atomically) if missing or stale."""
    path = cache_file(root, split, samples, side, grey)
    if path.is_file():
        return path
    rank_zero_info(f"decoding {len(samples)} images of {root}/{split} at {side} px into {path} (once)")
    images = build(samples, side, grey)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(partial, "wb") as f:
            torch.save({"images": images, "files": [p for p, _ in samples]}, f)
        os.replace(partial, path)
    except (OSError, RuntimeError) as err:
        partial.unlink(missing_ok=True)
        # torch's writer reports a failed write (a full disk) as a RuntimeError raised while handling it.
        cause = err if isinstance(err, OSError) else err.__context__
        if not isinstance(cause, OSError):
            raise
        raise OSError(cause.errno, f"{cause.strerror}: it needs {images.nbytes:,} bytes there") from err
    for stale in path.parent.glob(path.name.rsplit("-", 1)[0] + "-*.pt"):
        if stale != path:
            stale.unlink(missing_ok=True)
    return path


def load(path: Path, samples: list[tuple[str, int]]) -> Tensor:
    """The images of a decoded copy, checked to hold ``samples`` in their order."""
    stored = torch.load(path, weights_only=True)
    if stored["files"] != [p for p, _ in samples]:  # a hash collision or a hand-made file
        raise RuntimeError(f"{path} does not hold the images of {Path(samples[0][0]).parents[1]}")
    return stored["images"]
