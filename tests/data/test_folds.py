"""k-fold cross-validation, ``--data.folds K --data.fold I``: real DataModules over files in their
on-disk formats, and real runs of ``python -m app fit`` (one process, and two gloo processes)."""

import shutil
from pathlib import Path

import pytest
import torch
from helpers.cli import callback, check, run_app, run_process
from helpers.data_files import write_image_folder

import data
from data import CIFAR10DataModule, MNISTDataModule
from data.folds import fold_indices

ImageFolderDataModule = getattr(data, "ImageFolderDataModule", None)
needs_image_folder = pytest.mark.skipif(ImageFolderDataModule is None, reason="image folder part dropped")


def mnist(root, **options):
    return MNISTDataModule(str(root), download=False, num_workers=0, **options)


def cifar(root, **options):
    return CIFAR10DataModule(str(root), download=False, verify=False, num_workers=0, **options)


def image_folder(root, **options):
    return ImageFolderDataModule(str(root), num_workers=0, loader="torch", **options)


# Each DataModule over its own files: the imbalanced MNIST (classes of 10 and 100), CIFAR's pickles, an
# image folder's PNGs (36 images, 12 a class).
SOURCES = [
    (mnist, "imbalanced_mnist_root", 550),
    (cifar, "cifar10_root", 500),
    pytest.param(image_folder, "image_folder_root", 36, marks=needs_image_folder),
]


def split(make, root, **options):
    dm = make(root, **options)
    dm.setup("fit")
    labels = lambda subset: dm.labels(subset).tolist()  # noqa: E731
    return dm.train_set.indices, dm.val_set.indices, labels(dm.train_set), labels(dm.val_set)


@pytest.mark.parametrize(("make", "root_fixture", "n"), SOURCES)
def test_k_folds_cover_the_training_split_once_disjoint_and_stratified(make, root_fixture, n, request):
    root = request.getfixturevalue(root_fixture)
    for folds in (2, 3, 5):
        vals, counts = [], []
        for fold in range(folds):
            train, val, _, val_labels = split(make, root, folds=folds, fold=fold, val_size=7)
            assert sorted(set(train) | set(val)) == list(range(n)) and not set(train) & set(val)
            vals.append(set(val))
            counts.append(torch.bincount(torch.tensor(val_labels), minlength=10))
        assert sorted(i for val in vals for i in val) == list(range(n))  # each sample in one fold
        counts = torch.stack(counts)  # (fold, class)
        assert (counts.max(0).values - counts.min(0).values).max() <= 1  # stratified
        sizes = [len(val) for val in vals]
        assert max(sizes) - min(sizes) <= 1
    # Drawn by the seed: the same again, another with another seed.
    assert split(make, root, folds=3, fold=1) == split(make, root, folds=3, fold=1)
    assert split(make, root, folds=3, fold=1)[1] != split(make, root, folds=3, fold=1, seed=7)[1]


def test_a_class_smaller_than_k_and_uneven_classes_still_differ_by_at_most_one():
    labels = torch.tensor([0] * 2 + [1] * 7 + [2] * 13 + [3])  # 23 samples, 5 folds
    vals = [fold_indices(labels, 5, fold, seed=3)[1] for fold in range(5)]
    assert sorted(i for val in vals for i in val) == list(range(23))
    counts = torch.stack([torch.bincount(labels[val], minlength=4) for val in vals])
    assert (counts.max(0).values - counts.min(0).values).max() <= 1
    assert sorted(len(val) for val in vals) == [4, 4, 5, 5, 5]


def test_fitted_statistics_come_from_the_training_folds_only(imbalanced_mnist_root):
    """The class counts that ``--model.class_weights balanced`` weights by, with fold 1 of 4 held out."""
    dm = mnist(imbalanced_mnist_root, folds=4, fold=1)
    dm.setup("fit")
    train_labels, val_labels = dm.labels(dm.train_set), dm.labels(dm.val_set)
    assert dm.class_counts() == torch.bincount(train_labels, minlength=10).tolist()
    assert sum(dm.class_counts()) == len(dm.train_set) == 412
    everything = torch.bincount(torch.cat([train_labels, val_labels]), minlength=10)
    assert dm.class_counts() != everything.tolist()


@needs_image_folder
def test_an_image_folder_tested_on_its_val_folder_cross_validates_train(tmp_path):
    root = write_image_folder(tmp_path / "images", per_class=9)
    shutil.copytree(root / "test", root / "val")
    dm = image_folder(root, folds=3, fold=0, test_on="val")
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set)) == (18, 9)
    assert dm.val_set.dataset is dm.train_set.dataset  # a fold of train/, not val/
    dm.setup("test")
    assert Path(dm.test_set.dataset.root) == root / "val"


def error_line(result) -> str:
    assert result.returncode != 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), result.stderr[-3000:]
    return last


BAD = [
    (["--data.folds=1", "--data.fold=0"], "error: --data.folds 1: cross-validation needs 2 or more folds"),
    (["--data.folds=5", "--data.fold=5"], "error: --data.fold 5 is not a fold of 5: pass 0 to 4"),
    (["--data.folds=5"], "error: --data.folds 5 needs --data.fold I, the fold to validate on (0 to 4)"),
    (["--data.fold=2"], "error: --data.fold 2 needs --data.folds K, the number of folds (2 or more)"),
    (["--data.folds=3", "--data.fold=-1"], '"fold"'),
]


@pytest.mark.parametrize(("args", "expected"), BAD, ids=[" ".join(args) for args, _ in BAD])
def test_a_bad_fold_is_one_line_before_any_work(args, expected, mnist_root, tmp_path):
    spy = callback("helpers.stops.SlowSteps", seconds=0, started=str(tmp_path / "spy"))
    line = error_line(run_app("fit", f"--data.root={mnist_root}", *args, spy, cwd=tmp_path))
    assert line.startswith(expected) if expected.startswith("error") else expected in line, line
    assert not (tmp_path / "spy").exists() and not list(tmp_path.glob("runs/*/version_*"))


@needs_image_folder
def test_folds_beside_an_image_folder_val_split_are_one_line_before_any_work(tmp_path):
    root = write_image_folder(tmp_path / "images")
    shutil.copytree(root / "test", root / "val")
    args = ["--data=ImageFolderDataModule", f"--data.root={root}", "--data.folds=5", "--data.fold=2"]
    spy = callback("helpers.stops.SlowSteps", seconds=0, started=str(tmp_path / "spy"))
    line = error_line(run_app("fit", *args, "--model.net=CifarCNN", spy, cwd=tmp_path))
    assert line == (
        f"error: --data.folds validates on a fold of train/, and {root / 'val'} is a validation split "
        "of its own: drop --data.folds, move val/'s images into train/, or pass --data.test_on val to "
        "test on val/"
    )
    assert not (tmp_path / "spy").exists() and not (root / ".cache").exists()
    assert not list(tmp_path.glob("runs/*/version_*"))


FOLD = ["--data.folds=5", "--data.fold=2", "--test_after_fit=false", "--trainer.accelerator=cpu"]


def probed_fit(cwd, mnist_root, *args, process=False):
    """``fit`` of fold 2 of 5 with a :class:`helpers.fold_probe.FoldProbe`; what each rank saved."""
    probe = callback("helpers.fold_probe.FoldProbe", folder=str(cwd / "probe"))
    run = run_process if process else run_app
    result = run("fit", f"--data.root={mnist_root}", *FOLD, *args, probe, cwd=cwd)
    check(result)
    files = sorted((cwd / "probe").glob("rank*.pt"))
    return [torch.load(f, weights_only=True) for f in files], result


def test_a_fold_is_an_ordinary_fit(mnist_root, tmp_path):
    (single,), result = probed_fit(tmp_path, mnist_root, "--trainer.devices=1")
    assert "data: validating on fold 2 of 5 (128 samples), training on the other 512" in result.stderr
    targets = MNISTDataModule(str(mnist_root), download=False).load(train=True).targets
    assert (single["train"], single["val"]) == fold_indices(targets, 5, 2, seed=42)
    assert sorted(single["share"]) == single["val"] and len(single["seen"]) == 128


@pytest.mark.full
@pytest.mark.distributed
def test_two_processes_validate_on_the_fold_one_process_does(mnist_root, tmp_path):
    (single,), _ = probed_fit(tmp_path / "one", mnist_root, "--trainer.devices=1")
    ranks, _ = probed_fit(
        tmp_path / "two", mnist_root, "--trainer.devices=2", "--trainer.strategy=ddp", process=True
    )
    assert [rank["world_size"] for rank in ranks] == [2, 2]
    for rank in ranks:
        assert (rank["train"], rank["val"]) == (single["train"], single["val"])
    shares = [set(rank["share"]) for rank in ranks]
    assert not shares[0] & shares[1] and sorted(shares[0] | shares[1]) == single["val"]
    # The samples themselves: every (label, pixels) validated once over the two ranks, as by one.
    assert len(single["seen"]) == 128
    assert sorted(ranks[0]["seen"] + ranks[1]["seen"]) == sorted(single["seen"])
