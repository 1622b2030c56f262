"""The DataModules, reading files in the real on-disk formats through torchvision."""

import gzip

import pytest
import torch
from helpers.data_files import write_mnist

import data
from data import (
    CIFAR10DataModule,
    CIFAR100DataModule,
    DataError,
    DatasetNotFoundError,
    FashionMNISTDataModule,
    MNISTDataModule,
)
from data import mnist as mnist_module

# None where the optional image-folder part was dropped; its tests then skip (image_folder_root).
ImageFolderDataModule = getattr(data, "ImageFolderDataModule", None)


def test_mnist_split_sizes_shapes_and_normalization(mnist_root):
    dm = MNISTDataModule(root=str(mnist_root), download=False, batch_size=64, num_workers=0, val_size=128)
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set)) == (512, 128)
    x, y = next(iter(dm.train_dataloader()))
    assert x.shape == (64, 1, 28, 28) and x.dtype == torch.float32 and y.dtype == torch.int64
    # Normalized with MNIST's mean and std: background pixels (<60) are negative, squares positive.
    assert x.min() < -0.4 and x.max() == pytest.approx((1 - 0.1307) / 0.3081, abs=1e-4)
    dm.setup("test")
    assert len(dm.test_set) == 251


def test_validation_split_is_seeded_and_disjoint(mnist_root):
    def split(seed):
        dm = MNISTDataModule(root=str(mnist_root), download=False, val_size=0.25, seed=seed)
        dm.setup("fit")
        return set(dm.train_set.indices), set(dm.val_set.indices)

    train, val = split(42)
    assert len(val) == 160 and not train & val and len(train | val) == 640
    assert split(42) == (train, val)
    assert split(7)[1] != val


def test_fashion_mnist_reads_its_own_folder(tmp_path):
    write_mnist(tmp_path, folder="FashionMNIST")
    dm = FashionMNISTDataModule(root=str(tmp_path), download=False, batch_size=32, num_workers=0)
    dm.system_copy = tmp_path / "no-system-copy"
    dm.prepare_data()
    dm.setup("test")
    assert len(list(dm.test_dataloader())) == 8


def test_fashion_mnist_falls_back_to_the_os_package(tmp_path, fashion_mnist):
    dm = FashionMNISTDataModule(root=str(tmp_path), download=False, num_workers=0)
    dm.prepare_data()
    assert sorted(p.name for p in dm.data_dir.iterdir()) == [
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
    ]
    dm.setup("test")
    assert len(dm.test_set) == 10_000


def test_fashion_mnist_ranks_unpack_the_os_package_at_once(tmp_path, monkeypatch):
    """All ranks of a DDP fit read the test split before training, so each may unpack the OS copy; here
    a second one unpacks it whole while the first is halfway through its first file."""
    write_mnist(tmp_path / "source")
    system_copy = tmp_path / "system"
    system_copy.mkdir()
    for idx in (tmp_path / "source" / "MNIST" / "raw").iterdir():
        (system_copy / f"{idx.name}.gz").write_bytes(gzip.compress(idx.read_bytes()))

    def rank(root):
        dm = FashionMNISTDataModule(root=str(root), download=False, batch_size=32, num_workers=0)
        dm.system_copy = system_copy
        return dm

    copy, others = mnist_module.shutil.copyfileobj, [rank(tmp_path / "data")]

    def copy_while_another_rank_unpacks(src, dst):
        if others:
            others.pop().setup("test")
        copy(src, dst)

    monkeypatch.setattr(mnist_module.shutil, "copyfileobj", copy_while_another_rank_unpacks)
    first = rank(tmp_path / "data")
    first.setup("test")
    assert len(first.test_set) == 251 and not others
    assert sorted(p.name for p in first.data_dir.iterdir()) == sorted(p.stem for p in system_copy.iterdir())


@pytest.mark.parametrize("download", [False, True])
def test_missing_data_names_the_folder_and_both_fixes(tmp_path, download):
    dm = MNISTDataModule(root=str(tmp_path), download=download)
    with pytest.raises(DatasetNotFoundError) as info:
        dm.prepare_data()
    message = str(info.value)
    assert str(tmp_path / "MNIST" / "raw") in message
    assert "--data.download true" in message and "copy the MNIST files" in message
    assert ("download failed" if download else "download is off") in message


@pytest.mark.parametrize(
    ("module", "classes", "root_fixture"),
    [(CIFAR10DataModule, 10, "cifar10_root"), (CIFAR100DataModule, 100, "cifar100_root")],
)
def test_cifar_pickles_augmented_train_plain_eval(module, classes, root_fixture, request):
    root = request.getfixturevalue(root_fixture)
    dm = module(root=str(root), download=False, verify=False, batch_size=50, num_workers=0, val_size=100)
    assert dm.num_classes == classes
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set)) == (400, 100)
    x, y = next(iter(dm.train_dataloader()))
    assert x.shape == (50, 3, 32, 32) and int(y.max()) < classes
    # Same image twice: random crops/flips differ in training, evaluation is deterministic.
    assert not torch.equal(dm.train_set[0][0], dm.train_set[0][0]) or not torch.equal(
        dm.train_set[1][0], dm.train_set[1][0]
    )
    assert torch.equal(dm.val_set[0][0], dm.val_set[0][0])
    dm.setup("test")
    assert len(dm.test_set) == 200


def test_cifar_checks_official_checksums_by_default(cifar10_root):
    dm = CIFAR10DataModule(root=str(cifar10_root), download=False)
    with pytest.raises(DataError, match=r"batches-py/data_batch_1 is damaged .*md5.* --data\.verify false$"):
        dm.prepare_data()


def test_image_folder_classes_sizes_and_test_split(image_folder_root):
    dm = ImageFolderDataModule(
        root=str(image_folder_root), image_size=16, batch_size=8, num_workers=0, val_size=6
    )
    assert dm.num_classes == 3 and dm.in_channels == 3 and dm.classes == ["class_0", "class_1", "class_2"]
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set)) == (30, 6)
    x, _ = next(iter(dm.train_dataloader()))
    assert x.shape == (8, 3, 16, 16)
    dm.setup("test")
    assert len(dm.test_set) == 36
    gray = ImageFolderDataModule(root=str(image_folder_root), grayscale=True, num_workers=0)
    gray.setup("test")
    assert gray.in_channels == 1 and gray.test_set[0][0].shape == (1, 32, 32)


def test_val_size_too_large_is_a_clear_error(mnist_root):
    dm = MNISTDataModule(root=str(mnist_root), download=False, val_size=640)
    with pytest.raises(DataError, match=r"smaller --data\.val_size"):
        dm.setup("fit")
