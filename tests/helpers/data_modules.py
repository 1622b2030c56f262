"""Test-only DataModules, chosen with ``--data=helpers.data_modules.NAME``."""

from collections.abc import Callable

from torchvision.transforms import v2

from data import MNISTDataModule


class OwnTransform(MNISTDataModule):
    """MNIST with a per-image training transform of its own (which only the torch loader runs)."""

    def train_transform(self) -> Callable:
        return v2.Compose([v2.RandomHorizontalFlip(), super().train_transform()])
