"""LightningDataModules: MNIST, Fashion-MNIST, CIFAR-10/100 and image folders.

``--data NAME`` knows the classes imported here by their names; any other is given by its import
path (``--data my_pkg.MyDataModule``).
"""

from data.cifar import CIFAR10DataModule, CIFAR100DataModule
from data.mnist import FashionMNISTDataModule, MNISTDataModule
from data.vision import DataError, DatasetNotFoundError, VisionDataModule

__all__ = [
    "CIFAR10DataModule",
    "CIFAR100DataModule",
    "DataError",
    "DatasetNotFoundError",
    "FashionMNISTDataModule",
    "MNISTDataModule",
    "VisionDataModule",
]

# Optional parts: each is its folder and this one line.
from data.image_folder import ImageFolderDataModule as ImageFolderDataModule
from data.streaming import StreamingDataModule as StreamingDataModule
