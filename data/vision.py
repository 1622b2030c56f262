"""The base of every DataModule here: train/val split, test split, transforms, loaders."""

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import torch
from jsonargparse.typing import NonNegativeInt, OpenUnitInterval, PositiveInt
from lightning import LightningDataModule
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchdata.stateful_dataloader import StatefulDataLoader
from torchvision.transforms import v2

from data.errors import DataError, DatasetNotFoundError  # noqa: F401 (imported from here too)
from data.fingerprint import fingerprint
from data.folds import check_folds, fold_indices
from data.predict_files import ImageFiles, eval_transform, trained_card
from data.samplers import BalancedEpochSampler, BalancedSampler, EpochSampler


class TransformedSubset(Dataset):
    """The samples ``indices`` of ``dataset``, each image passed through ``transform``.

    One decoded data set serves both the augmented train split and the plain val split,
    which ``torch.utils.data.Subset`` cannot do (the transform belongs to the data set).
    Asked for ``(epoch, i)`` (see :class:`EpochSampler`), sample ``i``'s random transform is
    seeded by ``seed``, the epoch and ``i``: the same whichever worker process draws it, and
    after a resume.
    """

    def __init__(self, dataset: Dataset, indices: Sequence[int], transform: Callable, seed: int = 0) -> None:
        self.dataset, self.indices, self.transform, self.seed = dataset, indices, transform, seed

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, key: int | tuple[int, int]) -> tuple[Any, int]:
        epoch, i = key if isinstance(key, tuple) else (None, key)
        image, label = self.dataset[self.indices[i]]
        if getattr(image, "unreadable", False):  # left for the loader's collate_fn to drop
            return image, label
        if epoch is None:
            return self.transform(image), label
        # torchvision's transforms draw from the global generator: seed it for this sample only.
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(hash((self.seed, epoch, i)) & (2**63 - 1))
            return self.transform(image), label


class ToSize:
    """An image of another size than ``size`` x ``size``: short side resized to ``size`` (aspect kept),
    then its centre. Images of that size pass untouched, at no cost (v2's Resize and CenterCrop
    would take 35 us an MNIST digit to leave it as it is)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.resize = v2.Compose([v2.Resize(size, antialias=True), v2.CenterCrop(size)])

    def __call__(self, image: Any) -> Any:
        return image if v2.functional.get_size(image) == [self.size, self.size] else self.resize(image)


class VisionDataModule(LightningDataModule):
    """Image classification data: a train set (part held out for validation) and a test set.

    Subclasses set the class attributes below and implement :meth:`load`.

    Args:
        root: folder that holds the data set.
        batch_size: samples per batch **per device** (the global batch is this times
            devices times nodes).
        num_workers: loader worker processes per device; None picks from the cores per device.
        val_size: training samples held out for validation (an int), or a fraction in (0, 1); a
            data set of your own holds out a tenth unless it says otherwise (MNIST and CIFAR: 5000).
        seed: seed of the train/val split and of the shuffle of each epoch. The global
            order of an epoch depends only on it, not on the number of processes: rank r of
            n takes every n-th sample of it, so n processes at batch B see the batches that
            one process sees at batch n x B.
        sampler: ``shuffle``: each epoch is the training set reshuffled; ``balanced``: each epoch
            draws as many samples, every class equally often, with replacement (for imbalanced
            classes; seeded likewise). Labels come from the data set's ``targets``.
        folds: k-fold cross-validation: the training split cut into this many folds (2 or more),
            stratified by class and drawn by ``seed``; ``val_size`` is then not used (a fold is a
            K-th of the split). None: the ``val_size`` split.
        fold: with ``folds``, the fold validated on, 0 to ``folds - 1``; the others train.
        predict_dir: a folder of image files (subfolders too) that ``predict`` classifies, each prepared
            as the checkpoint's evaluation images were (:mod:`data.predict_files`); None: the test split.

    Anything fitted to the data (the class counts of ``--model.class_weights balanced``) is read from
    ``train_set``, which never holds the validation fold.
    """

    num_classes: int
    in_channels: int
    image_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    # The DataLoaders' (None: torch's default); one that drops unreadable samples turns skipping them on.
    collate_fn: Callable | None = None

    def __init__(
        self,
        root: str = "datasets",
        batch_size: PositiveInt = 128,
        num_workers: NonNegativeInt | None = None,
        val_size: PositiveInt | OpenUnitInterval = 0.1,
        seed: int = 42,
        sampler: Literal["shuffle", "balanced"] = "shuffle",
        folds: PositiveInt | None = None,
        fold: NonNegativeInt | None = None,
        predict_dir: str | None = None,
    ) -> None:
        super().__init__()
        check_folds(folds, fold)
        self.predict_dir = predict_dir
        self.folds, self.fold = folds, fold
        self.root = root
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.val_size = val_size
        self.seed = seed
        self.balanced = sampler == "balanced"
        self.resume_state: dict | None = None  # where a resumed epoch stands (see load_state_dict)

    @property
    def resize_size(self) -> int:
        """The short side of evaluation images before their centre crop (:class:`ToSize`)."""
        return self.image_size

    def load(self, train: bool) -> Dataset:
        """The train or test set on disk, yielding (PIL image, label)."""
        raise NotImplementedError

    def data_files(self) -> list[str | os.PathLike]:
        """The files the data set is read from, for :meth:`fingerprint`; a subclass names its own (none
        here: no fingerprint)."""
        return []

    def fingerprint(self) -> str | None:
        """16 hex digits standing for :meth:`data_files`: their names under ``root``, sizes and bytes
        (modification times past 256 MiB in all; see :func:`data.fingerprint.fingerprint`). None where
        no file is named or found."""
        return fingerprint(self.root, self.data_files())

    def eval_transform(self) -> Callable:
        """Image to normalized float tensor, ``image_size`` square (see :class:`ToSize`)."""
        steps = [v2.ToImage(), ToSize(self.image_size), v2.ToDtype(torch.float32, scale=True)]
        return v2.Compose([*steps, v2.Normalize(self.mean, self.std)])

    def augmentation(self) -> list[Callable]:
        """This data set's training augmentation, declared once for both loaders: torchvision v2
        transforms of a uint8 image (C, H, W) of ``image_size``, in order (none here).

        The DataLoader path applies them to each image (:meth:`train_transform`); the resident loader
        to whole batches, each image drawing its own randomness (:mod:`data.augment`: v2's flips,
        ``RandomCrop`` and ``RandomResizedCrop`` as batch kernels, any other transform image by image).
        """
        return []

    def train_transform(self) -> Callable:
        """:meth:`eval_transform` with :meth:`augmentation` applied before the conversion to floats."""
        steps = [v2.ToImage(), ToSize(self.image_size), *self.augmentation()]
        return v2.Compose([*steps, v2.ToDtype(torch.float32, scale=True), v2.Normalize(self.mean, self.std)])

    def setup(self, stage: str) -> None:
        if stage in ("fit", "validate") and self.folds:
            self.split_folds(self.load(train=True))
        elif stage in ("fit", "validate"):
            train = self.load(train=True)
            n_val = self.val_size if isinstance(self.val_size, int) else round(self.val_size * len(train))
            if not 0 < n_val < len(train):
                raise DataError(
                    f"val_size={self.val_size} leaves no samples for training or for validation "
                    f"(the train set has {len(train)}); pass a smaller --data.val_size"
                )
            order = torch.randperm(len(train), generator=torch.Generator().manual_seed(self.seed)).tolist()
            self.train_set = TransformedSubset(train, order[n_val:], self.train_transform(), self.seed)
            self.val_set = TransformedSubset(train, order[:n_val], self.eval_transform())
        if stage == "predict" and self.predict_dir is not None:
            return  # the files are listed by predict_dataloader, once the checkpoint's card is known
        if stage in ("test", "predict"):
            test = self.load(train=False)
            self.test_set = TransformedSubset(test, range(len(test)), self.eval_transform())
            self.predict_set = self.test_set

    def split_folds(self, train: Dataset) -> None:
        """``train_set`` and ``val_set`` of ``train``: fold ``fold`` validates, the others train."""
        every = TransformedSubset(train, range(len(train)), self.eval_transform())
        labels = self.labels(every, "--data.folds", "drop --data.folds")
        train_indices, val_indices = fold_indices(labels, self.folds, self.fold, self.seed)
        if not train_indices or not val_indices:
            raise DataError(
                f"--data.folds {self.folds} needs at least {self.folds} training samples, there are "
                f"{len(train)}: pass fewer folds"
            )
        self.train_set = TransformedSubset(train, train_indices, self.train_transform(), self.seed)
        self.val_set = TransformedSubset(train, val_indices, self.eval_transform())
        rank_zero_info(
            f"data: validating on fold {self.fold} of {self.folds} ({len(val_indices)} samples), "
            f"training on the other {len(train_indices)}; --data.val_size is not used"
        )

    def workers(self) -> int:
        """``num_workers``, or the cores per device minus one (at most 8; none if 2 or fewer,
        where workers would only take cores from the training process)."""
        if self.num_workers is not None:
            return int(self.num_workers)  # a plain int: loader states in checkpoints hold it
        devices = self.trainer.num_devices if self.trainer else 1
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        per_device = cores // devices
        return 0 if per_device <= 2 else min(8, per_device - 1)

    def sampler(
        self, dataset: TransformedSubset, train: bool, with_epoch: bool = False
    ) -> DistributedSampler:
        """This rank's share of ``dataset``: reshuffled (or drawn balanced) each epoch for training, in
        order otherwise; ``with_epoch``: yields ``(epoch, index)`` (see :class:`TransformedSubset`)."""
        world, rank = (self.trainer.world_size, self.trainer.global_rank) if self.trainer else (1, 0)
        if train:
            # Padded to equal shards, so every rank runs the same number of steps.
            # Overfitting a few batches means the same ones each epoch: Lightning unshuffles a DataLoader's.
            shuffle = not (self.trainer and self.trainer.overfit_batches)
            kind = EpochSampler if with_epoch else DistributedSampler
            options = {"shuffle": shuffle, "seed": self.seed}
            if self.balanced:
                kind = BalancedEpochSampler if with_epoch else BalancedSampler
                options["labels"] = self.labels(dataset)
            sampler = kind(dataset, world, rank, **options)
            if self.batch_size > len(sampler):
                processes = f"{world} process" + ("es" if world > 1 else "")
                raise DataError(
                    f"--data.batch_size {self.batch_size} is larger than the training set of each process: "
                    f"{len(sampler)} samples ({len(dataset)} over {processes}); "
                    f"pass --data.batch_size {len(sampler)} or less"
                )
            return sampler
        # Not padded, so evaluation counts every sample exactly once.
        return UnrepeatedDistributedSampler(dataset, world, rank, shuffle=False)

    def labels(
        self,
        dataset: TransformedSubset,
        wanted_by: str = "--data.sampler balanced",
        otherwise: str = "pass --data.sampler shuffle",
    ) -> Tensor:
        """The label of each sample of ``dataset``, from its data set's ``targets`` (no image is read);
        without them, a :class:`DataError` naming the option that ``wanted_by`` them and what to do
        ``otherwise``."""
        targets = getattr(dataset.dataset, "targets", None)
        if targets is None:
            raise DataError(
                f"{wanted_by} reads the training labels from the data set's `targets`, and "
                f"{type(self).__name__}'s ({type(dataset.dataset).__name__}) has none: give it `targets` "
                f"(a label per sample, as torchvision's data sets have) or {otherwise}"
            )
        return torch.as_tensor(targets)[torch.as_tensor(dataset.indices)]

    def class_counts(self) -> list[int]:
        """How many training samples each class has (``--model.class_weights balanced`` reads them)."""
        labels = self.labels(self.train_set, "--model.class_weights balanced", "give the weights as a list")
        return torch.bincount(labels, minlength=self.num_classes).tolist()

    def dataloader(self, dataset: TransformedSubset, train: bool = False) -> Iterable:
        """Batches of ``dataset`` for this rank: a DataLoader with worker processes."""
        workers = self.workers()
        options: dict[str, Any] = {
            "batch_size": int(self.batch_size),
            "sampler": self.sampler(dataset, train, with_epoch=train),
            "num_workers": workers,
            "persistent_workers": workers > 0,
            "pin_memory": torch.cuda.is_available(),
            "collate_fn": self.collate_fn,
        }
        if not train:
            return DataLoader(dataset, **options)
        # Stateful: its place in the epoch goes into checkpoints, for an exact mid-epoch resume. Its own
        # generator keeps it from drawing on the global one, whose states the checkpoints also hold.
        return StatefulDataLoader(dataset, generator=torch.Generator().manual_seed(self.seed), **options)

    def train_dataloader(self) -> Iterable:
        loader = self.dataloader(self.train_set, train=True)
        if self.resume_state:
            # Lightning makes the loader's first iterator before it sets the sampler's epoch, and a
            # DataLoader's draws its order then: it must be the saved epoch's.
            epoch = self.resume_state.get("epoch", 0)
            loader.sampler.set_epoch(epoch)
            if "train_loader" in self.resume_state:
                loader.load_state_dict(self.resume_state["train_loader"])
        self.train_loader, self.resume_state = loader, None
        return loader

    def state_dict(self) -> dict:
        """The train loader's place in its epoch, and the epoch, saved in checkpoints."""
        loader = getattr(self, "train_loader", None)
        if loader is None or self.trainer is None:
            return {}
        # The batches of this epoch trained on, as Lightning's own loop counts them.
        trained = self.trainer.fit_loop.epoch_loop.batch_progress.current.processed
        if trained >= self.trainer.num_training_batches:
            # Saved after the epoch's last batch: Lightning resumes at the next epoch, whose loader starts
            # afresh (the loader's own state would give it no batch at all).
            return {"epoch": loader.sampler.epoch + 1}
        return {"train_loader": loader.state_dict(), "epoch": loader.sampler.epoch, "trained": trained}

    def load_state_dict(self, state: dict) -> None:
        """Resume mid-epoch: the next train loader starts at the first batch not trained on."""
        # Lightning builds the train loader before it restores loop states (to count the steps of
        # the lr schedule), so it never hands a loader its saved state; the DataModule's comes first.
        self.resume_state = state if "epoch" in state else None

    def val_dataloader(self) -> Iterable:
        return self.dataloader(self.val_set)

    def test_dataloader(self) -> Iterable:
        return self.dataloader(self.test_set)

    def predict_dataloader(self) -> Iterable:
        # Always a DataLoader: only for one does Lightning tell prediction writers which samples each
        # batch holds (it wraps the batch sampler), and predictions.csv needs them.
        if self.predict_dir is not None:
            files = ImageFiles(self.predict_dir, self.in_channels)
            transform = eval_transform(trained_card(self))
            self.predict_set = TransformedSubset(files, range(len(files)), transform)
        return VisionDataModule.dataloader(self, self.predict_set)

    @property
    def class_names(self) -> list[str]:
        """The name of each class, by label: the loaded data set's ``classes``, else the label itself."""
        loaded = [getattr(self, name).dataset for name in ("train_set", "test_set") if hasattr(self, name)]
        names = next((d.classes for d in loaded if getattr(d, "classes", None)), None)
        return [str(n) for n in names] if names else [str(i) for i in range(self.num_classes)]

    @property
    def predict_id_name(self) -> str:
        """The column of predictions.csv that says which sample a row is."""
        return "index" if self.predict_dir is None else "file"

    def predict_id(self, i: int) -> int | str:
        """What names sample ``i`` of the predict set: its index in the test split, or its file's path
        relative to ``predict_dir``."""
        if self.predict_dir is not None:
            return self.predict_set.dataset.name(self.predict_set.indices[i])
        return self.predict_set.indices[i]
