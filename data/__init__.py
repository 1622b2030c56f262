"""LightningDataModules: MNIST, Fashion-MNIST, CIFAR-10/100 and image folders."""

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
