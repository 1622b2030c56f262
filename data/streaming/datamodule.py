"""``--data StreamingDataModule``: train from LitData shards that ``python -m app shard`` wrote."""

import functools
import importlib
import os
from collections.abc import Callable, Iterable
from typing import Any

import torch
from jsonargparse.typing import NonNegativeInt, PositiveFloat, PositiveInt
from lightning import LightningDataModule
from torch.utils.data import DataLoader, Dataset
from torchvision.io import ImageReadMode, decode_image
from torchvision.transforms import v2

from data import batch_transforms
from data.folds import check_folds
from data.predict_files import ImageFiles, eval_transform, trained_card
from data.streaming.store import FORMAT, SIDE_FILE, VERSION, Location, check_chunks, require_litdata
from data.vision import DataError, DatasetNotFoundError, TransformedSubset


def uint8_steps(transform: Callable) -> v2.Compose:
    """A DataModule's per-image transform up to its uint8 result: its float conversion and
    normalization dropped (done on the device, whole batches, as for the image folder's DataLoader)."""
    steps = transform.transforms if isinstance(transform, v2.Compose) else [transform]
    return v2.Compose([s for s in steps if not isinstance(s, v2.ToDtype | v2.Normalize)])


def make_shards(*args: Any, **kwargs: Any) -> Any:
    """An :class:`ImageShards` (a LitData ``StreamingDataset``); LitData is imported only here."""
    from litdata import ChunkWaitTimeoutError, StreamingDataset

    class ImageShards(StreamingDataset):
        """Samples as ``(uint8 image, label, index)``: decoded and transformed in the loader's workers.

        Sample ``index``'s random transform in an epoch is seeded by the seed, the epoch and ``index``:
        the same whichever worker or rank draws it, and after a resume.
        """

        def __init__(self, folder: str, *args: Any, transform: Callable, grey: bool, **kwargs: Any) -> None:
            super().__init__(folder, *args, **kwargs)
            self.folder, self.image_transform, self.grey = folder, transform, grey

        def __getitem__(self, index: Any) -> Any:
            try:
                item = super().__getitem__(index)
            except ChunkWaitTimeoutError:
                if not Location(self.folder).remote:
                    check_chunks(self.folder)  # cut short since the run began: named
                raise
            if not isinstance(item, dict):
                return item
            mode = ImageReadMode.GRAY if self.grey else ImageReadMode.RGB
            encoded = torch.frombuffer(bytearray(item["image"]), dtype=torch.uint8)
            # Upright by its EXIF orientation, as the image folder's loaders turn a camera's photo.
            image = decode_image(encoded, mode=mode, apply_exif_orientation=True)
            with torch.random.fork_rng(devices=[]):
                key = hash((self.seed, self.current_epoch, int(item["index"])))
                torch.default_generator.manual_seed(key & (2**63 - 1))
                image = self.image_transform(image)
            return image, int(item["label"]), int(item["index"])

        def stored_index(self, i: int) -> int:
            """The index in its split that sample ``i`` (LitData's order) was written with."""
            return int(super().__getitem__(i)["index"])

    return ImageShards(*args, **kwargs)


class ByPosition(Dataset):
    """A split's samples by their position: a map-style data set for a torch DataLoader, the only kind
    for which Lightning tells prediction writers which samples a batch holds."""

    def __init__(self, shards: Any) -> None:
        self.shards = shards

    def __len__(self) -> int:
        return len(self.shards)

    def __getitem__(self, i: int) -> Any:
        return self.shards[i]


class StreamingDataModule(LightningDataModule):
    """Shards written by ``python -m app shard``, streamed by LitData from a folder or ``s3://bucket/prefix``.

    Class names, channels, image size and normalization come from the shards' side file, and so does the
    augmentation: the shards' source DataModule's, applied per image in the loader's workers, which send
    uint8 batches; they are normalized on the device.

    Under DDP LitData gives each rank a share of the shuffled samples; every rank takes the same number
    of steps, ``(N // batch_size) // world_size`` (LitData's ``drop_last``, on in DDP): the last
    ``N mod (batch_size x world_size)`` samples or fewer of an epoch's order are left out, a different few
    each epoch, and no sample is taken twice. One process takes every sample, its last batch smaller.

    Args:
        root: the folder or ``s3://bucket/prefix`` given to ``shard --output``.
        batch_size: samples per batch per device.
        num_workers: loader worker processes per device; None picks from the cores per device.
        seed: seed of each epoch's shuffle (with the epoch) and of each sample's augmentation.
        folds: k-fold cross-validation, taken at shard time: shards hold the train/val split they
            were written with, and LitData streams whole shards, so fold ``fold`` of ``folds`` is
            written by ``shard --data.folds K --data.fold I``; here both must name the shards' fold
            (each fold its own shards), anything else is refused. None: the shards' split as written.
        fold: with ``folds``, the fold validated on, 0 to ``folds - 1``.
        cache_dir: where LitData keeps the chunks it downloaded from S3; None: its default.
        timeout: seconds a request to the S3 endpoint waits for its answer; one that gets none ends
            the run with an error, at any stage (LitData's reads are tried 3 times).
        predict_dir: a folder of image files that ``predict`` classifies, each prepared as the checkpoint's
            evaluation images were; None: the test split.
    """

    def __init__(
        self,
        root: str = "shards",
        batch_size: PositiveInt = 128,
        num_workers: NonNegativeInt | None = None,
        seed: int = 42,
        cache_dir: str | None = None,
        timeout: PositiveFloat = 10.0,
        folds: PositiveInt | None = None,
        fold: NonNegativeInt | None = None,
        predict_dir: str | None = None,
    ) -> None:
        super().__init__()
        check_folds(folds, fold)
        self.predict_dir = predict_dir
        self.folds, self.fold = folds, fold
        self.root, self.batch_size, self.num_workers = root, batch_size, num_workers
        self.seed, self.cache_dir, self.timeout = seed, cache_dir, timeout
        self.resume_state: dict | None = None
        self.unreachable: DataError | None = None

    # Read at first use (the CLI links num_classes to the model), not in __init__.
    @functools.cached_property
    def side(self) -> dict[str, Any]:
        """The shards' side file, checked: its format and version, and that it names its splits."""
        require_litdata()
        location = Location(self.root, self.timeout)
        side = location.read_json(SIDE_FILE)
        if side is None:
            raise DatasetNotFoundError(
                f"no shards in {self.root} (no {SIDE_FILE}): write them with python -m app shard "
                f"--data ... --output {self.root}"
            )
        if side.get("format") != FORMAT or side.get("version") != VERSION:
            found = f"{side.get('format', 'unknown format')} version {side.get('version', '?')}"
            raise DataError(
                f"{self.root} holds shards of another format ({found}; this code reads {FORMAT} version "
                f"{VERSION}): write them again with python -m app shard"
            )
        if "train" not in side.get("splits", {}) or "card" not in side:
            raise DataError(f"{location.join(SIDE_FILE)} is damaged: write the shards again")
        if self.folds:
            self.check_fold(side.get("source", {}))
        return side

    def check_fold(self, source: dict[str, Any]) -> None:
        """Refuse ``folds``/``fold`` that are not the fold the shards were written with."""
        written = source.get("init_args", {})
        if (written.get("folds"), written.get("fold")) == (self.folds, self.fold):
            return
        held = (
            f"fold {written['fold']} of {written['folds']}"
            if written.get("folds")
            else "the train/val split of --data.val_size"
        )
        name = source.get("class_path", "SOURCE").rpartition(".")[2]
        raise DataError(
            f"--data.folds {self.folds} --data.fold {self.fold}: the shards in {self.root} hold {held}, "
            "and LitData streams whole shards, it cannot take a stratified fold out of them: write this "
            f"fold's shards with python -m app shard --data {name} --data.folds {self.folds} "
            f"--data.fold {self.fold} --output DIR, and train from DIR"
        )

    @property
    def card(self) -> dict[str, Any]:
        return self.side["card"]

    @property
    def num_classes(self) -> int:
        return self.card["num_classes"]

    @property
    def in_channels(self) -> int:
        return self.card["in_channels"]

    @property
    def image_size(self) -> int:
        return self.card["image_size"]

    @property
    def resize_size(self) -> int:
        return self.card.get("resize_size", self.image_size)

    @property
    def mean(self) -> tuple[float, ...]:
        return tuple(self.card["mean"])

    @property
    def std(self) -> tuple[float, ...]:
        return tuple(self.card["std"])

    @property
    def class_names(self) -> list[str]:
        return list(self.card.get("class_names") or [str(i) for i in range(self.num_classes)])

    @property
    def has_test_split(self) -> bool:
        return "test" in self.side["splits"]

    def check_test_split(self) -> None:
        """The splits were written together, with one card: nothing to check beyond the side file."""
        _ = self.side

    @property
    def predict_id_name(self) -> str:
        return "index" if self.predict_dir is None else "file"

    def predict_id(self, i: int) -> int | str:
        """The test-split index that prediction ``i`` is of (as the source DataModule numbered it), or its
        file's path relative to ``predict_dir``."""
        if self.predict_dir is not None:
            return self.predict_set.dataset.name(i)
        return self.predict_set.shards.stored_index(i)

    @functools.cached_property
    def source(self) -> Any:
        """The DataModule the shards were written from, rebuilt for its transforms (it reads no file)."""
        spec = self.side.get("source", {})
        module, _, name = spec.get("class_path", "").rpartition(".")
        try:
            kind = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as err:
            raise DataError(
                f"the shards in {self.root} were written from {spec.get('class_path')}, which is not "
                "importable here: its augmentation cannot be rebuilt"
            ) from err
        return kind(**spec.get("init_args", {}))

    def transform(self, train: bool) -> Callable:
        """The source's per-image training (``train``) or evaluation transform, up to uint8."""
        return uint8_steps(self.source.train_transform() if train else self.source.eval_transform())

    def workers(self) -> int:
        """``num_workers``, or the cores per device minus one (at most 8; none if 2 or fewer)."""
        if self.num_workers is not None:
            return int(self.num_workers)
        devices = self.trainer.num_devices if self.trainer else 1
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return 0 if cores // devices <= 2 else min(8, cores // devices - 1)

    def dataset(self, split: str, train: bool = False) -> Any:
        """The LitData data set of ``split``; shuffled each epoch for training."""
        if split not in self.side["splits"]:
            raise DatasetNotFoundError(f"the shards in {self.root} have no {split} split")
        location = Location(self.root, self.timeout)
        if not location.remote:
            check_chunks(location.join(split))  # before the first step, not in the middle
        options = {"storage_options": location.litdata_options(), "cache_dir": self.cache_dir}
        return make_shards(
            location.join(split),
            shuffle=train,
            seed=self.seed,
            # Evaluation counts every sample once, however unevenly they fall on the ranks.
            drop_last=None if train else False,
            transform=self.transform(train),
            grey=self.in_channels == 1,
            **(options if location.remote else {}),
        )

    # workaround: LitData's ranks on a node race for a shared index (0.2.76); gone when one waits for another
    def setup(self, stage: str) -> None:
        """From S3 under DDP: each split's index fetched by one process per node before the others look.

        LitData's processes on a node share one cache, and one that finds another fetching the index
        gives up after a second and fails (seen on a loaded 2-core machine).
        """
        trainer = self.trainer
        if trainer is None or trainer.world_size == 1 or not Location(self.root).remote:
            return
        wanted = {"fit": ["train", "val"], "validate": ["val"], "test": ["test"]}
        wanted["predict"] = [] if self.predict_dir else ["test"]
        if trainer.local_rank == 0:
            for split in wanted.get(stage, []):
                if split in self.side["splits"]:
                    self.dataset(split)  # downloads its index.json into the cache
        trainer.strategy.barrier("streaming index")

    def dataloader(self, split: str, train: bool = False) -> Iterable:
        from litdata import StreamingDataLoader

        workers = self.workers()
        return StreamingDataLoader(
            self.dataset(split, train),
            batch_size=int(self.batch_size),
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=torch.cuda.is_available(),
        )

    def train_dataloader(self) -> Iterable:
        loader = self.dataloader("train", train=True)
        if self.resume_state:
            loader.load_state_dict(self.resume_state)
        self.train_loader, self.resume_state = loader, None
        return loader

    def val_dataloader(self) -> Iterable:
        return self.dataloader("val")

    def test_dataloader(self) -> Iterable:
        return self.dataloader("test")

    def predict_dataloader(self) -> Iterable:
        """The test split in its stored order, or the files of ``predict_dir``, through a torch DataLoader
        (predictions.csv needs one)."""
        if self.predict_dir is not None:
            files = ImageFiles(self.predict_dir, self.in_channels)
            self.predict_set = TransformedSubset(files, range(len(files)), eval_transform(trained_card(self)))
        else:
            self.predict_set = ByPosition(self.dataset("test"))
        workers = self.workers()
        return DataLoader(self.predict_set, batch_size=int(self.batch_size), num_workers=workers)

    def state_dict(self) -> dict:
        """The train loader's place in its epoch (LitData's state), saved in checkpoints."""
        loader = getattr(self, "train_loader", None)
        return loader.state_dict() if loader is not None else {}

    def load_state_dict(self, state: dict) -> None:
        # Lightning builds the train loader before it restores loop states, so it never hands the
        # loader its saved state; the DataModule's comes first.
        self.resume_state = state or None

    def on_exception(self, exception: BaseException) -> None:
        """Where a run from S3 failed, ask the endpoint: :attr:`unreachable` holds the line where it no
        longer answers (LitData's client gives up after its retries, a couple of seconds when refused)."""
        location = Location(self.root, self.timeout)
        if location.remote:
            try:
                location.check_bucket()
            except DataError as err:
                self.unreachable = err

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Normalize a uint8 batch on its device; the samples' indices stay behind."""
        if not isinstance(batch, tuple | list) or batch[0].dtype != torch.uint8:
            return batch
        images, labels = batch[0], batch[1]
        mean, std = (batch_transforms.per_channel(v, images.device) for v in (self.mean, self.std))
        return batch_transforms.normalize(images, mean, std), labels
