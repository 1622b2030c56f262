"""StreamingDataModule: the source's transforms in workers, uint8 batches normalized on the device."""

import csv

import torch
from helpers.cli import check, run_app
from torchvision.transforms import v2

from data.streaming import StreamingDataModule


def test_batches_are_uint8_and_normalized_as_the_dataloader_path_does(mnist_shards):
    data = StreamingDataModule(str(mnist_shards), batch_size=10, num_workers=0)
    assert (data.num_classes, data.in_channels, data.image_size) == (10, 1, 28)
    assert data.class_names[3] == "3 - three" and data.has_test_split
    images, labels, indices = next(iter(data.dataloader("val")))
    assert images.dtype == torch.uint8 and images.shape == (10, 1, 28, 28)
    assert indices.tolist() == list(range(10))  # evaluation in the stored order
    normalized, same_labels = data.on_after_batch_transfer((images, labels, indices), 0)
    assert torch.equal(same_labels, labels)
    expected = v2.Normalize(data.mean, data.std)(images.float() / 255)
    torch.testing.assert_close(normalized, expected)


def test_the_training_transform_is_the_source_datamodules_augmentation(image_folder_root, tmp_path):
    from data.image_folder import ImageFolderDataModule
    from data.streaming.writer import shard

    source = ImageFolderDataModule(str(image_folder_root), image_size=16, auto_augment="trivialaugment")
    shard(source, str(tmp_path / "s"), workers=1)
    data = StreamingDataModule(str(tmp_path / "s"), batch_size=4, num_workers=0)
    kinds = [type(step) for step in data.transform(train=True).transforms]
    assert kinds == [v2.RandomResizedCrop, v2.RandomHorizontalFlip, v2.TrivialAugmentWide]
    assert [type(step) for step in data.transform(train=False).transforms] == [v2.Resize, v2.CenterCrop]
    images, _, _ = next(iter(data.train_dataloader()))
    assert images.dtype == torch.uint8 and images.shape == (4, 3, 16, 16)


def test_predict_writes_a_row_per_test_sample(mnist_shards, tmp_path):
    check(
        run_app(
            "predict",
            "--data=StreamingDataModule",
            f"--data.root={mnist_shards}",
            "--untrained=true",
            cwd=tmp_path,
        )
    )
    (predictions,) = tmp_path.glob("runs/*/*/predictions.csv")
    rows = list(csv.DictReader(predictions.open()))
    assert sorted(int(row["index"]) for row in rows) == list(range(251))
