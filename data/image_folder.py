"""Your own images, one folder per class."""

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonargparse.typing import NonNegativeInt, OpenUnitInterval, PositiveInt
from PIL import Image, UnidentifiedImageError
from torch.utils.data import Dataset
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS, default_loader
from torchvision.transforms import v2

from data.vision import DataError, DatasetNotFoundError, TransformedSubset, VisionDataModule


class ImageFolderDataModule(VisionDataModule):
    """Images in ``ROOT/train/<class>/*`` (and ``ROOT/test/<class>/*`` for testing).

    Images are resized to ``image_size`` squares; training adds horizontal flips.

    Args:
        root: folder with ``train/`` and, for the test stage, ``test/``.
        image_size: side of the square the images are resized to.
        grayscale: read images as one channel instead of three.
        batch_size: samples per batch per device.
        num_workers: loader worker processes per device; None picks from the cores per device.
        val_size: training images held out for validation (an int), or a fraction in (0, 1).
        seed: seed of the train/val split.
        predict_dir: folder of unlabelled images (subfolders allowed) that ``predict`` classifies;
            None predicts ``ROOT/test``.
    """

    def __init__(
        self,
        root: str = "datasets/images",
        image_size: PositiveInt = 32,
        grayscale: bool = False,
        batch_size: PositiveInt = 128,
        num_workers: NonNegativeInt | None = None,
        val_size: PositiveInt | OpenUnitInterval = 0.1,
        seed: int = 42,
        predict_dir: str | None = None,
    ) -> None:
        super().__init__(root, batch_size, num_workers, val_size, seed)
        self.predict_dir = predict_dir
        self.image_size = image_size
        self.in_channels = 1 if grayscale else 3
        self.mean = self.std = (0.5,) * self.in_channels

    # Read at first use (the CLI links num_classes to the model), not in __init__: jsonargparse
    # would bury an error raised there under a page of its own.
    @functools.cached_property
    def classes(self) -> list[str]:
        """The class folders of ``ROOT/train``, sorted: label i is the i-th."""
        return self._classes(Path(self.root, "train"))

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @staticmethod
    def _classes(folder: Path) -> list[str]:
        classes = sorted(d.name for d in folder.iterdir() if d.is_dir()) if folder.is_dir() else []
        if not classes:
            raise DatasetNotFoundError(
                f"no class folders in {folder}: put your images in {folder}/<class name>/ "
                f"(or point --data.root at the folder that holds train/)"
            )
        if len(classes) == 1:
            raise DataError(
                f"only one class folder in {folder} ({classes[0]}): a classifier needs two or more, "
                f"one folder of images per class"
            )
        return classes

    def load(self, train: bool) -> Dataset:
        folder = Path(self.root, "train" if train else "test")
        if not train and (test := self._classes(folder)) != self.classes:
            only_test = sorted(set(test) - set(self.classes))
            only_train = sorted(set(self.classes) - set(test))
            differ = [f"only in test/: {', '.join(only_test)}"] if only_test else []
            differ += [f"only in train/: {', '.join(only_train)}"] if only_train else []
            raise DataError(
                f"the class folders of {folder} differ from those of {self.root}/train "
                f"({'; '.join(differ)}): give both the same class folders"
            )
        try:
            return ImageFolder(folder, loader=read_image)
        except FileNotFoundError as err:  # a class folder without images
            raise DataError(f"{folder}: {err}; put images in those class folders or delete them") from err

    def setup(self, stage: str) -> None:
        if stage == "predict" and self.predict_dir is not None:
            files = ImageFiles(Path(self.predict_dir))
            self.predict_set = TransformedSubset(files, range(len(files)), self.eval_transform())
        else:
            super().setup(stage)

    @property
    def class_names(self) -> list[str]:
        return self.classes

    predict_id_name = "file"

    def predict_id(self, i: int) -> str:
        """The path of predict image ``i``, relative to ``predict_dir`` (or to ``ROOT/test``)."""
        path, _ = self.predict_set.dataset.samples[self.predict_set.indices[i]]
        return Path(path).relative_to(self.predict_dir or Path(self.root, "test")).as_posix()

    def eval_transform(self) -> Callable:
        return v2.Compose([self._resize(), super().eval_transform()])

    def train_transform(self) -> Callable:
        return v2.Compose([self._resize(), v2.RandomHorizontalFlip(), super().eval_transform()])

    def _resize(self) -> Callable:
        steps = [v2.Resize((self.image_size, self.image_size))]
        if self.in_channels == 1:
            steps.append(v2.Grayscale())
        return v2.Compose(steps)


class ImageFiles(Dataset):
    """Every image file under ``folder``, in path order, as (image, -1): images without labels.

    torchvision's ``ImageFolder`` would demand one subfolder per class and read them as labels.
    """

    def __init__(self, folder: Path) -> None:
        files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMG_EXTENSIONS and p.is_file())
        if not files:
            raise DatasetNotFoundError(
                f"no images ({', '.join(IMG_EXTENSIONS)}) in {folder}: pass the folder that holds them "
                f"as --data.predict_dir"
            )
        self.samples = [(str(p), -1) for p in files]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        path, label = self.samples[i]
        return read_image(path), label


def read_image(path: str) -> Image.Image:
    """The image file ``path`` as RGB; a :class:`DataError` naming it if it cannot be decoded."""
    try:
        return default_loader(path)
    except OSError as err:  # PIL's errors for unknown formats and truncated files are OSErrors
        why = "not an image format PIL reads" if isinstance(err, UnidentifiedImageError) else str(err)
        raise DataError(f"cannot read the image {path} ({why}): delete or replace it") from err
