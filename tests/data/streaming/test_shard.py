"""``python -m app shard``: the splits of a real image folder and of MNIST, as LitData reads them back."""

import io
import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import check, run_app
from litdata import StreamingDataset
from PIL import Image

from data.mnist import MNISTDataModule


def read_back(split: Path) -> list[dict]:
    dataset = StreamingDataset(str(split))
    return sorted((dataset[i] for i in range(len(dataset))), key=lambda item: item["index"])


def test_an_image_folder_is_stored_as_its_files_bytes(image_folder_root, tmp_path):
    ImageFolderDataModule = pytest.importorskip("data.image_folder").ImageFolderDataModule  # an optional part
    check(
        run_app(
            "shard",
            "--data=ImageFolderDataModule",
            f"--data.root={image_folder_root}",
            "--data.val_size=6",
            f"--output={tmp_path / 's'}",
            cwd=tmp_path,
            shrink=False,
        )
    )
    assert not list(tmp_path.glob("runs/*/*"))  # shard leaves no run folder behind
    side = json.loads((tmp_path / "s" / "streaming.json").read_text())
    assert side["splits"] == {"train": 30, "val": 6, "test": 36}
    assert side["card"]["class_names"] == ["class_0", "class_1", "class_2"]
    assert side["source"]["class_path"] == "data.image_folder.datamodule.ImageFolderDataModule"
    # The same split as the DataModule's own, each image the file's bytes as read from disk.
    data = ImageFolderDataModule(str(image_folder_root), val_size=6)
    data.setup("fit")
    data.setup("test")
    for name, subset in (("train", data.train_set), ("val", data.val_set), ("test", data.test_set)):
        items = read_back(tmp_path / "s" / name)
        files = [subset.dataset.samples[k] for k in subset.indices]
        assert [item["label"] for item in items] == [label for _, label in files]
        assert [item["image"] for item in items] == [Path(path).read_bytes() for path, _ in files]


def test_mnist_is_stored_as_lossless_png(mnist_root, mnist_shards):
    data = MNISTDataModule(str(mnist_root), val_size=100)
    data.setup("fit")
    items = read_back(mnist_shards / "val")
    assert len(items) == 100
    for item, k in zip(items, data.val_set.indices, strict=True):
        pixels = np.array(Image.open(io.BytesIO(item["image"])))
        assert Image.open(io.BytesIO(item["image"])).format == "PNG"
        assert np.array_equal(pixels, data.val_set.dataset.data[k].numpy())
        assert item["label"] == int(data.val_set.dataset.targets[k])
