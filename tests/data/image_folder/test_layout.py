"""An image folder's layout mistakes, each one line saying what to do."""

import pytest

from data import ImageFolderDataModule
from data.vision import DatasetNotFoundError


def test_image_folder_without_classes_says_where_to_put_images(tmp_path):
    (tmp_path / "train").mkdir()
    with pytest.raises(DatasetNotFoundError, match=r"no class folders in .*train: put your images"):
        _ = ImageFolderDataModule(root=str(tmp_path)).num_classes


def test_class_folders_outside_train_or_a_missing_root_say_what_to_do(tmp_path):
    def error(root):
        with pytest.raises(DatasetNotFoundError) as raised:
            _ = ImageFolderDataModule(root=str(root)).num_classes
        return str(raised.value)

    for name in ("cat", "dog", ".cache"):
        (tmp_path / name).mkdir()
    assert error(tmp_path).startswith(
        f"{tmp_path} has folders (cat, dog) but no train/: move the class folders into {tmp_path}/train/"
    )
    (tmp_path / "train").mkdir()
    split = tmp_path / "train"
    assert error(split) == f"{split} is a split: pass --data.root {tmp_path} (it holds train/)"
    assert error(tmp_path / "nowhere").startswith(f"no folder {tmp_path}/nowhere: pass --data.root")
