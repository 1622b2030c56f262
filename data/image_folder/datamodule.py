"""Your own images, one folder per class, at their own resolution and aspect."""

import functools
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import torch
from jsonargparse.typing import NonNegativeInt, OpenUnitInterval, PositiveInt
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from torch.utils.data import Dataset
from torchvision.transforms import v2

from data import batch_transforms
from data.augment import resident_transform
from data.image_folder import cache, layout, photos
from data.resident import ResidentLoader
from data.vision import DataError, DatasetNotFoundError, TransformedSubset, VisionDataModule

log = logging.getLogger(__name__)


class ImageFolderDataModule(VisionDataModule):
    """Images in ``ROOT/train/<class>/*``, and optional ``ROOT/val/<class>/*`` and ``ROOT/test/<class>/*``.

    Validation reads ``ROOT/val`` where it exists (all of train/ then trains), else a share of train/
    (``val_size``, or fold ``fold`` of ``folds``); testing reads ``ROOT/test``, or ``ROOT/val`` with
    ``test_on="val"``.

    Training takes a random-resized crop of ``image_size`` (aspect kept), then flip and policy
    (:meth:`augmentation`, for both loaders); evaluation resizes the short side to
    ``image_size / crop_ratio`` and takes the centre crop.

    Args:
        root: folder with ``train/``, and optional ``val/`` and ``test/`` (the same class folders).
        image_size: side of the square crops the network sees.
        grayscale: read images as one channel instead of three.
        batch_size: samples per batch per device (32: torchvision's ImageNet recipe's, and
            a folder of a few hundred photos still gives a few steps an epoch).
        num_workers: loader worker processes per device; None picks from the cores per device.
        val_size: training images held out for validation (an int), or a fraction in (0, 1); not
            used where ``ROOT/val`` exists.
        seed: seed of the train/val split (or folds) and of each epoch's shuffle.
        folds: k-fold cross-validation: train/ cut into this many folds (2 or more), stratified by
            class, drawn by ``seed``; ``val_size`` is then not used. Refused where ``ROOT/val``
            exists, unless ``test_on="val"`` makes it the test split. None: no folds.
        fold: with ``folds``, the fold validated on, 0 to ``folds - 1``; the others train.
        sampler: ``shuffle``, or ``balanced``: each class as often (see :class:`VisionDataModule`).
        predict_dir: folder of unlabelled images (subfolders allowed) that ``predict`` classifies;
            None predicts the test split's folder.
        flip: mirror training crops left-right at random.
        auto_augment: a torchvision policy applied to each training crop, or ``none``.
        crop_scale: the range of the training crop's area, as a share of the image's.
        crop_ratio: ``image_size`` over the short side of evaluation images before their centre crop.
        mean: per-channel mean to normalize with; None: the pretrained weights' (set by the CLI),
            else ImageNet's.
        std: per-channel standard deviation, likewise.
        loader: ``resident`` decodes the folder once (cached in ``ROOT/.cache``) into one uint8
            tensor on the device and augments whole batches there; ``torch`` decodes in DataLoader
            workers every epoch; ``auto`` is resident where the decoded copy takes under a quarter
            of the free memory.
        test_on: the folder ``test`` (and fit's final test) reads: ``test`` (``ROOT/test``; without it
            fit ends untested), or ``val`` (``ROOT/val``, for data sets shipped as train/ and val/).
        skip_unreadable: leave images that cannot be decoded (cut short, damaged) out of their batches,
            counted in one line when fit or test ends, rather than stop at the first with its name;
            decodes each epoch (``loader`` torch), and predict still stops at one.
    """

    def __init__(
        self,
        root: str = "datasets/images",
        image_size: PositiveInt = 32,
        grayscale: bool = False,
        batch_size: PositiveInt = 32,
        num_workers: NonNegativeInt | None = None,
        val_size: PositiveInt | OpenUnitInterval = 0.1,
        seed: int = 42,
        folds: PositiveInt | None = None,
        fold: NonNegativeInt | None = None,
        sampler: Literal["shuffle", "balanced"] = "shuffle",
        predict_dir: str | None = None,
        flip: bool = True,
        auto_augment: photos.AutoAugment = "none",
        crop_scale: tuple[float, float] = (0.08, 1.0),
        crop_ratio: OpenUnitInterval | Literal[1] = 0.875,
        mean: tuple[float, ...] | None = None,
        std: tuple[float, ...] | None = None,
        loader: Literal["auto", "resident", "torch"] = "auto",
        test_on: Literal["test", "val"] = "test",
        skip_unreadable: bool = False,
    ) -> None:
        split = {"folds": folds, "fold": fold, "predict_dir": predict_dir}
        super().__init__(root, batch_size, num_workers, val_size, seed, sampler, **split)
        if not 0 < crop_scale[0] <= crop_scale[1] <= 1:
            raise ValueError(
                f"--data.crop_scale must be two numbers 0 < low <= high <= 1, got {list(crop_scale)}"
            )
        self.image_size = image_size
        self.in_channels = 1 if grayscale else 3
        self.flip, self.auto_augment = flip, auto_augment
        self.crop_scale, self.crop_ratio = crop_scale, crop_ratio
        self.given = {"mean": mean, "std": std}
        for name, imagenet in (("mean", photos.IMAGENET_MEAN), ("std", photos.IMAGENET_STD)):
            value = self.given[name] or (imagenet if self.in_channels == 3 else (sum(imagenet) / 3,))
            if len(value) != self.in_channels:
                raise ValueError(
                    f"--data.{name} needs {self.in_channels} values (one a channel), got {list(value)}"
                )
            setattr(self, name, tuple(value))
        self.loader, self.test_on = loader, test_on
        if skip_unreadable and loader == "resident":
            raise ValueError(
                "--data.skip_unreadable leaves images out of each epoch's batches, and --data.loader "
                "resident decodes them all once: pass --data.loader torch"
            )
        self.skip_unreadable = skip_unreadable
        self.collate_fn = photos.collate_readable if skip_unreadable else None
        self.left_out: dict[str, str] = {}  # unreadable images met since the stage began: path, why
        self._decoded: dict[str, Tensor] = {}

    def follow_weights(self, resize_size: int, crop_size: int, mean: tuple, std: tuple) -> None:
        """Normalize and crop as pretrained weights were trained, where ``--data.mean``/``std`` are unset."""
        if self.given["mean"] or self.given["std"]:
            return
        if self.in_channels == 1:  # the network sums its RGB kernels: one grey channel, averaged statistics
            mean, std = (sum(mean) / len(mean),), (sum(std) / len(std),)
        self.mean, self.std, self.crop_ratio = tuple(mean), tuple(std), crop_size / resize_size
        size = self.image_size
        advice = f"; this run crops {size} px, they saw {crop_size} (--data.image_size {crop_size})"
        rank_zero_info(
            f"data: as the weights were trained: mean {self.mean}, std {self.std}, short side "
            f"{resize_size} then centre crop {crop_size} (crop_ratio {self.crop_ratio:.3f})"
            + ("" if crop_size == self.image_size else advice)
        )

    # Read at first use (the CLI links num_classes to the model), not in __init__: jsonargparse
    # would bury an error raised there under a page of its own.
    @functools.cached_property
    def classes(self) -> list[str]:
        """The class folders of ``ROOT/train``, sorted: label i is the i-th. A ``ROOT/val`` is checked
        here to have the same: fit and validate read it, and the CLI reads this before a run starts."""
        classes = layout.train_classes(Path(self.root))
        if self.has_val_split and self.folds and self.test_on != "val":
            raise DataError(
                f"--data.folds validates on a fold of train/, and {Path(self.root, 'val')} is a validation "
                "split of its own: drop --data.folds, move val/'s images into train/, or pass "
                "--data.test_on val to test on val/"
            )
        if self.has_val_split:
            layout.check_split_classes(Path(self.root), "val", classes)
        return classes

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def load(self, train: bool) -> Dataset:
        if not train:
            self.check_test_split()
        return self.folder("train" if train else self.test_on)

    def check_test_split(self) -> None:
        if self.test_on == "val" and not self.has_val_split:
            raise DatasetNotFoundError(
                f"--data.test_on val tests on {Path(self.root, 'val')}, which does not exist: put the "
                f"validation images there, in train/'s class folders, or pass --data.test_on test"
            )
        layout.check_split_classes(Path(self.root), self.test_on, self.classes)

    @functools.cache  # noqa: B019 (one DataModule per run: its cache lives as long)
    def folder(self, split: str) -> photos.PhotoFolder:
        """The images of ``ROOT/split``, listed once; val/ and test/ after their class folders are checked."""
        if split != "train":
            layout.check_split_classes(Path(self.root), split, self.classes)
        try:
            grey = self.in_channels == 1
            return photos.PhotoFolder(Path(self.root, split), self.resize_size, grey, self.skip_unreadable)
        except FileNotFoundError as err:  # a class folder without images
            raise DataError(
                f"{self.root}/{split}: {err}; put images in those class folders or delete them"
            ) from err

    @property
    def resize_size(self) -> int:
        """The short side of evaluation images before their centre crop, ``image_size / crop_ratio``; also
        the side images are decoded at (JPEGs scaled in the decoder) and kept at when resident."""
        return photos.eval_size(self.image_size, self.crop_ratio)

    @functools.cached_property
    def resident(self) -> bool:
        """Whether the folder is kept decoded in memory; ``auto`` decides, in one log line."""
        if self.loader != "auto" or self.skip_unreadable:
            return self.loader == "resident"
        count = sum(len(self.folder(split)) for split in self.splits())
        size = cache.decoded_bytes(count, self.resize_size, self.in_channels == 1)
        device = self.trainer.strategy.root_device if self.trainer else torch.device("cpu")
        fits = cache.fits(size, device)
        rank_zero_info(
            f"data: {count} images take {size / 2**20:.0f} MiB decoded at {self.resize_size} px: "
            + (
                "kept decoded in memory (--data.loader resident)"
                if fits
                else "decoded in each epoch (--data.loader torch)"
            )
        )
        return fits

    @property
    def has_val_split(self) -> bool:
        """Whether ``ROOT/val`` exists: then it is the validation split."""
        return Path(self.root, "val").is_dir()

    @property
    def has_test_split(self) -> bool:
        """Whether there is a test split: ``ROOT/test`` is optional (then fit ends without a test);
        ``test_on="val"`` asks for ``ROOT/val`` (:meth:`check_test_split` says where it is missing)."""
        return self.test_on == "val" or Path(self.root, "test").is_dir()

    def splits(self) -> list[str]:
        """The folders a run reads, of train/, val/ and the test split, those that exist."""
        wanted = dict.fromkeys(["train", "val", self.test_on])
        return [split for split in wanted if split == "train" or Path(self.root, split).is_dir()]

    def data_files(self) -> list[str]:
        if self.trainer is not None and self.trainer.predicting:
            return []  # predictions read predict_dir or test/ alone, train/ perhaps absent (prepare_data)
        return [path for split in self.splits() for path, _ in self.folder(split).samples]

    def prepare_data(self) -> None:
        # Lightning runs this on one process per node, the others waiting: the decoded copies are
        # written once. Where ROOT is read-only, each process decodes in memory (setup says so).
        # Predictions always go through a DataLoader, from predict_dir or test/: no copy, no train/ needed.
        if self.trainer is not None and self.trainer.predicting:
            return
        folders = {split: self.folder(split) for split in self.splits()}  # all checked before decoding
        if self.resident:
            for split, folder in folders.items():
                samples = folder.samples
                try:
                    cache.prepare(self.root, split, samples, self.resize_size, self.in_channels == 1)
                except OSError as err:
                    why = err.strerror or err
                    rank_zero_info(f"data: cannot keep the decoded copy in {self.root}/.cache ({why})")

    def setup(self, stage: str) -> None:
        if stage == "predict" and self.predict_dir is None and not Path(self.root, self.test_on).is_dir():
            raise DatasetNotFoundError(
                f"nothing to predict: pass --data.predict_dir FOLDER, the images to classify "
                f"(without it, predict reads {Path(self.root, self.test_on)}, which does not exist)"
            )
        if stage in ("fit", "validate"):
            _ = self.classes  # refuses --data.folds beside a val/ that would validate
        if stage in ("fit", "validate") and self.has_val_split and not self.folds:
            train, val = self.folder("train"), self.folder("val")
            self.train_set = TransformedSubset(train, range(len(train)), self.train_transform(), self.seed)
            self.val_set = TransformedSubset(val, range(len(val)), self.eval_transform())
            rank_zero_info(
                f"data: validating on {Path(self.root, 'val')} ({len(val)} images), training on all "
                f"{len(train)} of {Path(self.root, 'train')}; --data.val_size is not used"
            )
            return
        super().setup(stage)

    def decoded(self, folder: photos.PhotoFolder) -> Tensor:
        """The images of ``folder`` decoded, from the copy ``prepare_data`` wrote (read once)."""
        if folder.root not in self._decoded:
            split, grey = Path(folder.root).name, self.in_channels == 1
            path = cache.cache_file(self.root, split, folder.samples, self.resize_size, grey)
            if path.is_file():
                self._decoded[folder.root] = cache.load(path, folder.samples)
            else:
                # Every process that decodes in memory says so: under DDP the others should have read
                # the copy that one process per node wrote.
                rank = self.trainer.global_rank if self.trainer is not None else 0
                log.warning(f"data: rank {rank} decodes {folder.root} in memory ({path} is missing)")
                self._decoded[folder.root] = cache.build(folder.samples, self.resize_size, grey)
        return self._decoded[folder.root]

    def dataloader(self, dataset: TransformedSubset, train: bool = False) -> Iterable:
        if not self.resident:
            return super().dataloader(dataset, train)
        device = self.trainer.strategy.root_device if self.trainer else torch.device("cpu")
        indices = torch.as_tensor(dataset.indices)
        # Channels last: each crop is then a block of whole pixels, which torch's uint8 resize reads fastest.
        images = self.decoded(dataset.dataset)[indices].to(device, memory_format=torch.channels_last)
        labels = self.labels(dataset).to(device)
        mean, std = (batch_transforms.per_channel(v, device) for v in (self.mean, self.std))
        if train:
            transform = resident_transform(self.augmentation(), mean, std)
        else:
            transform = photos.centre_crops(self.image_size, mean, std)
        return ResidentLoader(images, labels, self.batch_size, self.sampler(dataset, train), transform)

    @property
    def class_names(self) -> list[str]:
        return self.classes

    predict_id_name = "file"

    def predict_id(self, i: int) -> str:
        """The path of predict image ``i``, relative to ``predict_dir`` (or to the test split's folder)."""
        if self.predict_dir is not None:
            return super().predict_id(i)
        path, _ = self.predict_set.dataset.samples[self.predict_set.indices[i]]
        return Path(path).relative_to(self.root, self.test_on).as_posix()

    def eval_transform(self) -> Callable:
        return photos.eval_transform(self.image_size, self.crop_ratio)

    def augmentation(self) -> list[Callable]:
        return photos.augmentation(self.image_size, self.crop_scale, self.flip, self.auto_augment)

    def train_transform(self) -> Callable:
        """:meth:`augmentation` alone: the workers send uint8 crops, normalized on the device."""
        return v2.Compose(self.augmentation())

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Take the unreadable images :func:`photos.collate_readable` left out of ``batch``, to count them."""
        batch = super().on_before_batch_transfer(batch, dataloader_idx)
        if self.collate_fn is None or not isinstance(batch, tuple) or len(batch) != 3:
            return batch
        images, labels, left_out = batch
        if left_out and self.trainer is not None and self.trainer.predicting:
            # Each row of predictions.csv names its image by its place in the batch: none may go missing.
            raise DataError(f"{left_out[0].why}: predict cannot leave images out")
        self.left_out.update((u.path, u.why) for u in left_out)
        return images, labels

    def teardown(self, stage: str) -> None:
        """Count the unreadable images left out in one line (this process's, under DDP)."""
        if self.left_out:
            stage, paths = getattr(stage, "value", stage), sorted(self.left_out)  # Lightning passes its enum
            more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
            log.warning(
                f"data: {stage} left out {len(paths)} unreadable image(s) (--data.skip_unreadable): "
                f"{', '.join(paths[:3])}{more}; delete or replace them"
            )
        self.left_out = {}

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Normalize a DataLoader's uint8 batch where it now is, on the training device.

        Its workers send uint8 crops: a quarter of the bytes through shared memory and to the GPU,
        and 1.2x the images a second at 224 px (2 CPU cores).
        """
        # Resident batches come normalized; Lightning also passes the model summary's example input.
        if not isinstance(batch, tuple | list) or batch[0].dtype != torch.uint8:
            return batch
        images, labels = batch
        mean, std = (batch_transforms.per_channel(v, images.device) for v in (self.mean, self.std))
        return batch_transforms.normalize(images, mean, std), labels
