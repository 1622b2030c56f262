"""DataModules over torchvision's downloadable data sets (MNIST family, CIFAR)."""

from collections.abc import Iterable
from pathlib import Path
from typing import Literal
from urllib.error import URLError

import torch
from jsonargparse.typing import NonNegativeInt, OpenUnitInterval, PositiveInt
from torch.utils.data import Dataset

from data.augment import resident_transform
from data.batch_transforms import per_channel
from data.resident import ResidentLoader
from data.vision import DataError, DatasetNotFoundError, TransformedSubset, VisionDataModule


class TorchvisionDataModule(VisionDataModule):
    """A data set read by a torchvision class that takes ``(root, train, download)``.

    Args:
        root: folder holding torchvision's layout (e.g. ``ROOT/MNIST/raw/...``).
        download: fetch the files into ``root`` if missing (once, on one process per node).
        batch_size: samples per batch per device.
        num_workers: loader worker processes per device; None picks from the cores per device.
        val_size: training samples held out for validation (an int), or a fraction in (0, 1).
        seed: seed of the train/val split (or folds) and of each epoch's shuffle.
        folds: k-fold cross-validation: the training split cut into this many folds (2 or more),
            stratified by class, drawn by ``seed``; ``val_size`` is then not used. None: no folds.
        fold: with ``folds``, the fold validated on, 0 to ``folds - 1``; the others train.
        sampler: ``shuffle``, or ``balanced``: each class as often (see :class:`VisionDataModule`).
        predict_dir: a folder of image files that ``predict`` classifies; None: the test split.
        loader: ``resident`` keeps each split as one uint8 tensor on the training device and
            augments whole batches there (fast); ``torch`` is the classic DataLoader with per-image
            transforms in worker processes. Both see the same samples in each epoch, augmented by
            the one declaration, ``augmentation()``, with the same distribution.
    """

    dataset_class: type
    name: str

    def __init__(
        self,
        root: str = "datasets",
        download: bool = True,
        batch_size: PositiveInt = 128,
        num_workers: NonNegativeInt | None = None,
        val_size: PositiveInt | OpenUnitInterval = 5000,
        seed: int = 42,
        folds: PositiveInt | None = None,
        fold: NonNegativeInt | None = None,
        sampler: Literal["shuffle", "balanced"] = "shuffle",
        loader: Literal["resident", "torch"] = "resident",
        predict_dir: str | None = None,
    ) -> None:
        split = {"folds": folds, "fold": fold, "predict_dir": predict_dir}
        super().__init__(root, batch_size, num_workers, val_size, seed, sampler, **split)
        self.download = download
        self.loader = loader
        # The resident loader runs augmentation() on whole batches, never these per-image transforms.
        own = [name for name in ("train_transform", "eval_transform") if overrides(type(self), name)]
        if loader == "resident" and own:
            raise DataError(
                f"{type(self).__name__} overrides {' and '.join(f'{n}()' for n in own)}, which the resident "
                "loader does not run: declare the training augmentation in augmentation() (v2 transforms of "
                "a uint8 image), or pass --data.loader torch"
            )

    @property
    def data_dir(self) -> Path:
        """Where the files must be."""
        raise NotImplementedError

    def dataloader(self, dataset: TransformedSubset, train: bool = False) -> Iterable:
        if self.loader == "torch":
            return super().dataloader(dataset, train)
        device = self.trainer.strategy.root_device if self.trainer else torch.device("cpu")
        data = torch.as_tensor(dataset.dataset.data)  # (N, H, W) grey or (N, H, W, C) colour
        images = data.unsqueeze(1) if data.ndim == 3 else data.permute(0, 3, 1, 2)
        indices = torch.as_tensor(dataset.indices)
        mean, std = (per_channel(v, device) for v in (self.mean, self.std))
        return ResidentLoader(
            images[indices].contiguous().to(device),
            self.labels(dataset).to(device),
            self.batch_size,
            self.sampler(dataset, train),
            resident_transform(self.augmentation() if train else [], mean, std),
        )

    @property
    def class_names(self) -> list[str]:
        # The MNIST family's names are known before any file is read; CIFAR's come with its files.
        names = getattr(self.dataset_class, "classes", None)
        return [str(n) for n in names] if names else super().class_names

    def prepare_data(self) -> None:
        if self.predict_dir is not None and self.trainer is not None and self.trainer.predicting:
            return  # the files of predict_dir alone are read: the data set may be elsewhere
        for train in (True, False):
            self.open(train, download=self.download)

    def load(self, train: bool) -> Dataset:
        return self.open(train, download=False)

    def open(self, train: bool, download: bool) -> Dataset:
        """Read the split, downloading it first if asked; one clear error if impossible."""
        try:
            return self.dataset_class(self.root, train=train, download=False)
        except Exception as err:
            # Checked before any download: torchvision would write over a file it finds damaged.
            damage = self.damaged_file()
            if damage is not None:
                raise DataError(damage) from err
            if not isinstance(err, RuntimeError | OSError):
                raise  # neither missing nor damaged files: a bug, with its traceback
            missing = err
        why = "download is off"
        if download:
            try:
                return self.dataset_class(self.root, train=train, download=True)
            except (RuntimeError, URLError, OSError) as err:
                why, missing = f"the download failed ({_last_line(err)})", err
        raise DatasetNotFoundError(
            f"{self.name} not found in {self.data_dir} and {why}. Fix: run once with "
            f"--data.download true on a machine with network, or copy the {self.name} files "
            f"into {self.data_dir} (or point --data.root at a folder that has them)."
        ) from missing

    def damaged_file(self) -> str | None:
        """What is wrong with the first damaged file in :attr:`data_dir`, and its fix; None if none is."""
        return None


def damaged(path: Path, why: str, fix: str = "") -> str:
    """The message for a damaged data file: what is wrong, and how to get an intact one."""
    return (
        f"{path} is damaged ({why}): delete it and run again to download it anew "
        f"(--data.download true), or copy an intact one there{fix}"
    )


def _last_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[-1]


def overrides(cls: type, name: str) -> bool:
    """Whether ``cls`` defines its own ``name``, not :class:`VisionDataModule`'s."""
    return getattr(cls, name) is not getattr(VisionDataModule, name)
