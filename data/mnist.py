"""MNIST and Fashion-MNIST: 28x28 grey images in IDX files, 10 classes."""

import gzip
import math
import os
import shutil
import struct
import uuid
from collections.abc import Callable
from pathlib import Path

from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import Dataset
from torchvision.datasets import MNIST, FashionMNIST
from torchvision.transforms import v2

from data.torchvision_data import TorchvisionDataModule, damaged
from data.vision import DatasetNotFoundError


class MNISTDataModule(TorchvisionDataModule):
    """MNIST, read from ``ROOT/MNIST/raw/*-ubyte``."""

    dataset_class = MNIST
    name = "MNIST"
    num_classes, in_channels, image_size = 10, 1, 28
    mean, std = (0.1307,), (0.3081,)

    @property
    def data_dir(self) -> Path:
        return Path(self.root, self.dataset_class.__name__, "raw")

    def data_files(self) -> list[Path]:
        return [self.data_dir / Path(archive).stem for archive, _ in self.dataset_class.resources]

    def damaged_file(self) -> str | None:
        for path in self.data_files():
            why = _idx_problem(path) if path.is_file() else None
            if why:
                return damaged(path, why)
        return None


class FashionMNISTDataModule(MNISTDataModule):
    """Fashion-MNIST, read from ``ROOT/FashionMNIST/raw/*-ubyte``.

    Offline, it falls back to the copy that Debian's ``dataset-fashion-mnist`` package
    installs in ``/usr/share/datasets/fashion-mnist`` (``apt install dataset-fashion-mnist``).

    Args:
        flip: mirror training images left-right at random (clothes look alike both ways; digits
            do not, so MNIST has no such option).
        **kwargs: see :class:`TorchvisionDataModule`.
    """

    dataset_class = FashionMNIST
    name = "Fashion-MNIST"
    mean, std = (0.2860,), (0.3530,)
    system_copy = Path("/usr/share/datasets/fashion-mnist")

    def __init__(self, *args, flip: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.flip = flip

    def augmentation(self) -> list[Callable]:
        return [v2.RandomHorizontalFlip()] if self.flip else []

    def open(self, train: bool, download: bool) -> Dataset:
        try:
            return super().open(train, download)
        except DatasetNotFoundError:
            if not self._unpack_system_copy():
                raise
            return super().open(train, download=False)

    def _unpack_system_copy(self) -> bool:
        """Decompress the OS package's files into ``data_dir``; False if there are none."""
        archives = [self.system_copy / name for name, _ in self.dataset_class.resources]
        if not all(path.is_file() for path in archives):
            return False
        rank_zero_info(
            f"{self.name} is not in {self.data_dir}: using the OS package's copy in {self.system_copy}"
        )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for archive in archives:
            # Each process its own partial file: all ranks of a DDP run may unpack at once (the fit
            # reads the test split on every rank before training), and each rename is whole.
            partial = self.data_dir / f"{archive.stem}.{uuid.uuid4().hex[:12]}.partial"
            try:
                with gzip.open(archive) as src, open(partial, "xb") as dst:
                    shutil.copyfileobj(src, dst)
                os.replace(partial, self.data_dir / archive.stem)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
        return True


def _idx_problem(path: Path) -> str | None:
    """Why ``path`` is not a whole IDX file of bytes, MNIST's format; None if it is one."""
    with open(path, "rb") as f:
        magic = f.read(4)  # 0, 0, type 8 (unsigned byte), number of dimensions
        if len(magic) < 4 or magic[:3] != b"\0\0\x08" or not 1 <= magic[3] <= 3:
            return "not an IDX file of bytes"
        dims = f.read(4 * magic[3])
    if len(dims) < 4 * magic[3]:
        return "cut short in its header"
    expected = 4 + len(dims) + math.prod(struct.unpack(f">{magic[3]}I", dims))
    size = path.stat().st_size
    return None if size == expected else f"{size} bytes where its header announces {expected}"
