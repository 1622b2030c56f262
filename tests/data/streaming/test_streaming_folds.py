"""Folds of streamed shards are taken at shard time: ``shard --data.folds K --data.fold I`` writes that
fold as the val split, and ``StreamingDataModule`` refuses a fold its shards do not hold."""

import pytest
from helpers.cli import callback, check, run_app

from data import DataError, MNISTDataModule
from data.streaming import StreamingDataModule


@pytest.fixture(scope="module")
def fold_shards(mnist_root, tmp_path_factory):
    """Fold 2 of 5 of the MNIST fixture's 640 training images, and its test split, as shards."""
    tmp = tmp_path_factory.mktemp("fold-shards")
    args = ["--data=MNISTDataModule", f"--data.root={mnist_root}", "--data.folds=5", "--data.fold=2"]
    check(run_app("shard", *args, f"--output={tmp / 's'}", cwd=tmp, shrink=False))
    return tmp / "s"


def test_shards_of_a_fold_hold_that_fold(fold_shards, mnist_root):
    streamed = StreamingDataModule(str(fold_shards), num_workers=0, folds=5, fold=2)
    assert streamed.side["splits"] == {"train": 512, "val": 128, "test": 251}
    source = MNISTDataModule(str(mnist_root), download=False, folds=5, fold=2)
    source.setup("fit")
    images, targets = source.val_set.dataset.data, source.val_set.dataset.targets
    expected = sorted((int(targets[i]), int(images[i].sum())) for i in source.val_set.indices)
    val = streamed.dataset("val")
    assert sorted((int(label), int(image.sum())) for image, label, _ in val) == expected


def test_a_fold_the_shards_do_not_hold_is_refused(fold_shards, mnist_shards):
    with pytest.raises(DataError, match=r"hold fold 2 of 5, and LitData streams whole shards"):
        _ = StreamingDataModule(str(fold_shards), folds=5, fold=1).num_classes
    with pytest.raises(DataError) as info:
        _ = StreamingDataModule(str(mnist_shards), folds=5, fold=2).num_classes
    assert str(info.value) == (
        f"--data.folds 5 --data.fold 2: the shards in {mnist_shards} hold the train/val split of "
        "--data.val_size, and LitData streams whole shards, it cannot take a stratified fold out of them: "
        "write this fold's shards with python -m app shard --data MNISTDataModule --data.folds 5 "
        "--data.fold 2 --output DIR, and train from DIR"
    )


def test_a_fold_the_shards_do_not_hold_is_one_line_before_any_work(mnist_shards, tmp_path):
    spy = callback("helpers.stops.SlowSteps", seconds=0, started=str(tmp_path / "spy"))
    args = ["--data=StreamingDataModule", f"--data.root={mnist_shards}", "--data.folds=5", "--data.fold=2"]
    result = run_app("fit", *args, "--model.net=MnistCNN", spy, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: --data.folds 5 --data.fold 2: the shards"), line
    assert not (tmp_path / "spy").exists() and not list(tmp_path.glob("runs/*/version_*"))
