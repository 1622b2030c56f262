"""CIFAR-10 and CIFAR-100: 32x32 colour images in pickled batches."""

import pickle
from collections.abc import Callable
from pathlib import Path

from torchvision.datasets import CIFAR10, CIFAR100
from torchvision.datasets.utils import check_integrity
from torchvision.transforms import v2

from data.torchvision_data import TorchvisionDataModule, damaged


class CIFAR10DataModule(TorchvisionDataModule):
    """CIFAR-10, read from ``ROOT/cifar-10-batches-py``; random crop and flip for training.

    Args:
        verify: check the official md5 sums; turn off for batches you re-packed yourself.
        **kwargs: see :class:`TorchvisionDataModule`.
    """

    dataset_class = CIFAR10
    name = "CIFAR-10"
    num_classes, in_channels, image_size = 10, 3, 32
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)

    def __init__(self, *args, verify: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not verify:
            self.dataset_class = _without_md5(self.dataset_class)

    @property
    def data_dir(self) -> Path:
        return Path(self.root, self.dataset_class.base_folder)

    def data_files(self) -> list[Path]:
        cls = self.dataset_class
        return [self.data_dir / name for name, _ in [*cls.train_list, *cls.test_list]] + [
            self.data_dir / cls.meta["filename"]
        ]

    def damaged_file(self) -> str | None:
        cls = self.dataset_class
        for name, md5 in [*cls.train_list, *cls.test_list, (cls.meta["filename"], cls.meta["md5"])]:
            path = self.data_dir / name
            if not path.is_file():
                continue
            if md5 is not None:
                if not check_integrity(str(path), md5):
                    fix = "; or, if you re-packed the batches yourself, pass --data.verify false"
                    return damaged(path, f"not the official {self.name} file: its md5 sum differs", fix)
                continue
            try:
                with open(path, "rb") as f:
                    pickle.load(f, encoding="latin1")
            except Exception as err:  # whatever unpickling a damaged file raises
                return damaged(path, f"not a whole pickle: {err}")
        return None

    def augmentation(self) -> list[Callable]:
        return [v2.RandomCrop(self.image_size, padding=4), v2.RandomHorizontalFlip()]


class CIFAR100DataModule(CIFAR10DataModule):
    """CIFAR-100 (fine labels), read from ``ROOT/cifar-100-python``."""

    dataset_class = CIFAR100
    name = "CIFAR-100"
    num_classes = 100
    mean, std = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)


def _without_md5(cls: type[CIFAR10]) -> type[CIFAR10]:
    """``cls`` with the md5 sums blanked: torchvision then checks only that files exist."""
    return type(
        cls.__name__,
        (cls,),
        {
            "train_list": [[name, None] for name, _ in cls.train_list],
            "test_list": [[name, None] for name, _ in cls.test_list],
            "meta": {**cls.meta, "md5": None},
        },
    )
