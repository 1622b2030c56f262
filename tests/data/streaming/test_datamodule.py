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


def test_a_sideways_camera_photo_is_decoded_upright_as_the_folder_reads_it(tmp_path):
    from PIL import Image

    from data.image_folder import ImageFolderDataModule
    from data.image_folder.photos import read_photo
    from data.streaming.datamodule import make_shards
    from data.streaming.writer import shard

    for k, name in enumerate(["a", "b"]):
        folder = tmp_path / "photos" / "train" / name
        folder.mkdir(parents=True)
        for i in range(3):
            pixels = torch.randint(
                0, 256, (40, 64, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(i)
            )
            exif = Image.Exif()
            exif[0x0112] = 6 if (k, i) == (0, 0) else 1  # the first photo: stored sideways, turn 90 degrees
            Image.fromarray(pixels.numpy()).save(folder / f"{i}.jpg", quality=95, exif=exif)
    source = ImageFolderDataModule(str(tmp_path / "photos"), val_size=1)
    shard(source, str(tmp_path / "s"), workers=1)
    source.setup("fit")
    shapes = []
    for split, subset in (("train", source.train_set), ("val", source.val_set)):
        shards = make_shards(str(tmp_path / "s" / split), transform=lambda image: image, grey=False)
        for position in range(len(shards)):
            image, _, index = shards[position]
            expected = read_photo(subset.dataset.samples[subset.indices[index]][0])
            assert image.shape == expected.shape
            assert (image.int() - expected.int()).abs().float().mean() < 2  # two JPEG decoders
            shapes.append(tuple(image.shape[-2:]))
    assert sorted(shapes) == [(40, 64)] * 5 + [(64, 40)]
