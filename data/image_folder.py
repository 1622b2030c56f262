"""Your own images, one folder per class."""

from collections.abc import Callable
from pathlib import Path

from torch.utils.data import Dataset
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from data.vision import DatasetNotFoundError, VisionDataModule


class ImageFolderDataModule(VisionDataModule):
    """Images in ``ROOT/train/<class>/*`` (and ``ROOT/test/<class>/*`` for testing).

    Images are resized to ``image_size`` squares; training adds horizontal flips.

    Args:
        root: folder with ``train/`` and, for the test stage, ``test/``.
        image_size: side of the square the images are resized to.
        grayscale: read images as one channel instead of three.
        batch_size: samples per batch per device.
        num_workers: loader worker processes per device; None picks from the cores per device.
        val_size: training images held out for validation (an int), or a fraction.
        seed: seed of the train/val split.
    """

    def __init__(
        self,
        root: str = "datasets/images",
        image_size: int = 32,
        grayscale: bool = False,
        batch_size: int = 128,
        num_workers: int | None = None,
        val_size: int | float = 0.1,
        seed: int = 42,
    ) -> None:
        super().__init__(root, batch_size, num_workers, val_size, seed)
        self.image_size = image_size
        self.in_channels = 1 if grayscale else 3
        self.mean = self.std = (0.5,) * self.in_channels
        self.classes = self._classes(Path(root, "train"))
        self.num_classes = len(self.classes)

    @staticmethod
    def _classes(folder: Path) -> list[str]:
        classes = sorted(d.name for d in folder.iterdir() if d.is_dir()) if folder.is_dir() else []
        if not classes:
            raise DatasetNotFoundError(
                f"no class folders in {folder}: put your images in {folder}/<class name>/ "
                f"(or point --data.root at the folder that holds train/)"
            )
        return classes

    def load(self, train: bool) -> Dataset:
        folder = Path(self.root, "train" if train else "test")
        if not train and self._classes(folder) != self.classes:
            raise DatasetNotFoundError(
                f"the class folders of {folder} differ from those of {self.root}/train"
            )
        return ImageFolder(folder)

    def eval_transform(self) -> Callable:
        return v2.Compose([self._resize(), super().eval_transform()])

    def train_transform(self) -> Callable:
        return v2.Compose([self._resize(), v2.RandomHorizontalFlip(), super().eval_transform()])

    def _resize(self) -> Callable:
        steps = [v2.Resize((self.image_size, self.image_size))]
        if self.in_channels == 1:
            steps.append(v2.Grayscale())
        return v2.Compose(steps)
