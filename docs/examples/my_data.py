"""README, "Make it yours": the example data set (the tests run this file)."""

from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from data import VisionDataModule


class MyData(VisionDataModule):
    num_classes, in_channels, image_size = 5, 3, 64
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)

    def load(self, train: bool):
        return ImageFolder(f"{self.root}/{'train' if train else 'test'}")

    def augmentation(self):  # optional: training images only
        return [v2.RandomCrop(64, padding=4), v2.RandomHorizontalFlip()]
