"""Each DataModule's fingerprint: a digest of the files it reads, the same for the same files wherever they
lie, another for other files."""

import os
import shutil

import pytest
from helpers.data_files import write_mnist

import data
from data import CIFAR10DataModule, MNISTDataModule
from data import fingerprint as fingerprint_module

ImageFolderDataModule = getattr(data, "ImageFolderDataModule", None)


def mnist_fingerprint(root) -> str | None:
    return MNISTDataModule(root=str(root), download=False).fingerprint()


def test_the_same_files_anywhere_give_one_fingerprint_other_files_another(mnist_root, tmp_path):
    # A copy with new modification times (copytree's copy, not copy2), in another folder.
    shutil.copytree(mnist_root / "MNIST", tmp_path / "copy" / "MNIST", copy_function=shutil.copy)
    other = write_mnist(tmp_path / "other", n_train=600)
    found = mnist_fingerprint(mnist_root)
    assert len(found) == 16 and int(found, 16) >= 0
    assert mnist_fingerprint(tmp_path / "copy") == found
    assert mnist_fingerprint(other) not in (None, found)
    # One byte changed, the size the same:
    image = tmp_path / "copy" / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    body = bytearray(image.read_bytes())
    body[-1] ^= 0xFF
    image.write_bytes(bytes(body))
    assert mnist_fingerprint(tmp_path / "copy") != found
    assert mnist_fingerprint(tmp_path / "nothing") is None


def test_past_the_content_limit_modification_times_stand_for_the_bytes(mnist_root, tmp_path, monkeypatch):
    monkeypatch.setattr(fingerprint_module, "CONTENT_LIMIT", 0)
    shutil.copytree(mnist_root / "MNIST", tmp_path / "MNIST")  # copy2: modification times kept
    found = mnist_fingerprint(tmp_path)
    assert found == mnist_fingerprint(mnist_root)
    labels = tmp_path / "MNIST" / "raw" / "train-labels-idx1-ubyte"
    os.utime(labels, ns=(labels.stat().st_atime_ns, labels.stat().st_mtime_ns + 10**9))
    assert mnist_fingerprint(tmp_path) != found


def test_cifar_and_image_folders_have_fingerprints(cifar10_root, image_folder_root, tmp_path):
    cifar = CIFAR10DataModule(root=str(cifar10_root), download=False, verify=False).fingerprint()
    assert cifar is not None and cifar != mnist_fingerprint(write_mnist(tmp_path))
    if ImageFolderDataModule is None:
        pytest.skip("the image-folder part (data/image_folder/) was dropped")
    folder = ImageFolderDataModule(str(image_folder_root)).fingerprint()
    copy = shutil.copytree(image_folder_root, tmp_path / "images", copy_function=shutil.copy)
    assert folder is not None and ImageFolderDataModule(str(copy)).fingerprint() == folder
