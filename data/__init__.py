"""LightningDataModules: MNIST, Fashion-MNIST, CIFAR-10/100 and image folders."""

import importlib
import pkgutil

from data.cifar import CIFAR10DataModule, CIFAR100DataModule
from data.image_folder import ImageFolderDataModule
from data.mnist import FashionMNISTDataModule, MNISTDataModule
from data.vision import DataError, DatasetNotFoundError, VisionDataModule

__all__ = [
    "CIFAR10DataModule",
    "CIFAR100DataModule",
    "DataError",
    "DatasetNotFoundError",
    "FashionMNISTDataModule",
    "ImageFolderDataModule",
    "MNISTDataModule",
    "VisionDataModule",
]

# Import every module here, so that a DataModule in a new file is known to `--data` by its name.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
