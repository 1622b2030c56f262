"""Photos at their own size and aspect: transforms, mixed files, the decoded copy and its two loaders."""

import logging
import os

import numpy as np
import pytest
import torch
from helpers.cli import ROOT, check, logged, run_app, run_folder
from helpers.data_files import write_photo_folder
from PIL import Image
from torchvision.transforms import RandomResizedCrop

from data import ImageFolderDataModule
from data.batch_transforms import crop_boxes, normalize, random_resized_crop
from data.image_folder import photos as photo_files
from data.image_folder.cache import decode_square
from data.image_folder.photos import IMAGENET_MEAN, IMAGENET_STD, read_photo


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    return write_photo_folder(tmp_path_factory.mktemp("photos"), per_class=16)


def module(root, **kwargs) -> ImageFolderDataModule:
    options = {"image_size": 24, "batch_size": 8, "num_workers": 0, "val_size": 6} | kwargs
    return ImageFolderDataModule(str(root), **options)


def test_evaluation_keeps_the_aspect_and_takes_the_centre(tmp_path):
    # 64x32: red, green, blue in the left quarter, middle half and right quarter. The centre crop of
    # 28 (short side resized to 28 / 0.875 = 32: unchanged) is all green; a squashed image would not be.
    pixels = np.zeros((32, 64, 3), np.uint8)
    pixels[:, :16, 0], pixels[:, 16:48, 1], pixels[:, 48:, 2] = 255, 255, 255
    Image.fromarray(pixels).save(tmp_path / "wide.png")
    image = read_photo(tmp_path / "wide.png")
    dm = ImageFolderDataModule(str(tmp_path), image_size=28)
    crop = dm.eval_transform()(image)  # uint8: normalized once the batch is on the device
    assert crop.shape == (3, 28, 28) and crop.dtype == torch.uint8
    assert torch.equal(crop, torch.tensor([0, 255, 0], dtype=torch.uint8).view(3, 1, 1).expand(3, 28, 28))
    batch, _ = dm.on_after_batch_transfer((crop[None], torch.tensor([0])), 0)
    rgb = batch[0] * torch.tensor(IMAGENET_STD).view(3, 1, 1) + torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    assert torch.allclose(rgb, torch.tensor([0.0, 1.0, 0.0]).view(3, 1, 1).expand(3, 28, 28), atol=1e-5)
    # The resident copy is the centred square of the short side (32), which holds that crop.
    square = decode_square(str(tmp_path / "wide.png"), 32, grey=False)
    assert square.shape == (3, 32, 32) and (square[1] == 255).all() and (square[[0, 2]] == 0).all()


@pytest.mark.parametrize("grey", [False, True])
def test_a_sideways_camera_photo_is_turned_upright_by_its_exif_orientation(grey, tmp_path):
    # Stored 64 wide, 32 high, white on the left; orientation 6: shown turned 90 degrees clockwise,
    # 32 wide, 64 high, white at the top. Large enough that the JPEG is decoded at 1/2 scale.
    pixels = np.zeros((32, 64, 3), np.uint8)
    pixels[:, :32] = 255
    exif = Image.Exif()
    exif[0x0112] = 6  # EXIF Orientation
    Image.fromarray(pixels).save(tmp_path / "phone.jpg", exif=exif.tobytes(), quality=95)
    image = read_photo(tmp_path / "phone.jpg", short_side=16, grey=grey)
    assert image.shape == (1 if grey else 3, 32, 16)  # (C, H, W): upright, and at 1/2 scale
    assert (image[:, :14] > 240).all() and (image[:, 18:] < 15).all()
    square = decode_square(str(tmp_path / "phone.jpg"), 16, grey)  # the resident copy's decoding too
    assert (square[:, :6] > 240).all() and (square[:, 10:] < 15).all()


def test_jpegs_decode_to_the_same_pixels_through_torchcodec_and_pil(tmp_path, monkeypatch):
    # A photo's worth of texture, in colour and grey, read in colour and in grey (a colour JPEG's
    # luma channel alone: by both decoders, not PIL's colour-to-grey formula).
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8).repeat(2, 0).repeat(2, 1)
    Image.fromarray(pixels).save(tmp_path / "rgb.jpg", quality=90)
    Image.fromarray(pixels).convert("L").save(tmp_path / "grey.jpg", quality=90)
    reads = [(name, grey) for name in ("rgb.jpg", "grey.jpg") for grey in (False, True)]
    torchcodec = photo_files.jpeg_decoder()
    if torchcodec is None:
        # Built for another torch (the lowest versions', make test-lowest): PIL decodes. With the versions
        # CI pins (constraints.txt) it loads.
        pins = dict(
            line.split("==") for line in (ROOT / "constraints.txt").read_text().split() if "==" in line
        )
        assert torch.__version__.split("+")[0] != pins["torch"]
    else:
        calls = []
        monkeypatch.setattr(
            photo_files, "jpeg_decoder", lambda: lambda *a, **k: calls.append(a) or torchcodec(*a, **k)
        )
        decoded = {(name, grey): read_photo(tmp_path / name, 64, grey) for name, grey in reads}
        assert len(calls) == len(reads)
        monkeypatch.setattr(photo_files, "jpeg_decoder", lambda: None)  # where torchcodec does not load
        for name, grey in reads:
            assert torch.equal(read_photo(tmp_path / name, 64, grey), decoded[name, grey])
    with Image.open(tmp_path / "rgb.jpg") as reference:  # and PIL's plain RGB decoding
        expected = torch.from_numpy(np.array(reference)).permute(2, 0, 1)
    assert torch.equal(read_photo(tmp_path / "rgb.jpg", 64, False), expected)


def test_grey_rgba_palette_gif_and_small_photos_are_converted_other_files_skipped(photos, caplog):
    formats = {(Image.open(p).format, Image.open(p).mode) for p in photos.rglob("*.*") if p.suffix != ".txt"}
    assert {("JPEG", "RGB"), ("JPEG", "L"), ("PNG", "RGBA"), ("PNG", "P"), ("GIF", "P")} <= formats
    with caplog.at_level(logging.INFO):
        for grayscale, channels in ((False, 3), (True, 1)):
            dm = module(photos, grayscale=grayscale, loader="torch")
            dm.setup("fit")
            images, labels = next(iter(dm.train_dataloader()))
            assert images.shape == (8, channels, 24, 24) and labels.dtype == torch.int64
    assert "skipped 1 file(s) that are not images (1 .txt); images are .jpg .jpeg .png" in caplog.text
    assert len(dm.train_set) + len(dm.val_set) == 48  # notes.txt is not a sample


def test_both_loaders_draw_the_same_samples_and_evaluate_alike(photos):
    resident, classic = module(photos, loader="resident"), module(photos, loader="torch")
    for dm in (resident, classic):
        dm.prepare_data()
        dm.setup("fit")
    for epoch in (0, 1):
        batches = []
        for dm in (resident, classic):
            loader = dm.train_dataloader()
            loader.sampler.set_epoch(epoch)
            batches.append([labels for _, labels in loader])
        assert all(torch.equal(a, b) for a, b in zip(*batches, strict=True))
    # Validation: the same centre crops, up to a pixel of rounding where the two crops compose.
    for (xa, ya), batch in zip(resident.val_dataloader(), classic.val_dataloader(), strict=True):
        assert xa.dtype == torch.float32 and batch[0].dtype == torch.uint8  # normalized after the transfer
        xb, yb = classic.on_after_batch_transfer(batch, 0)
        assert torch.equal(ya, yb) and (xa - xb).abs().mean() < 0.05


def test_the_decoded_copy_is_reused_then_rebuilt_when_a_file_changes(tmp_path, caplog):
    root = write_photo_folder(tmp_path / "photos", per_class=4)
    with caplog.at_level(logging.INFO):
        module(root, loader="resident", val_size=2).prepare_data()
        (first,) = (root / ".cache").glob("decoded-train-*.pt")
        stamp = first.stat().st_mtime_ns
        caplog.clear()
        module(root, loader="resident", val_size=2).prepare_data()
        assert "decoding" not in caplog.text and first.stat().st_mtime_ns == stamp
        changed = next((root / "train" / "class_1").glob("*.jpg"))
        Image.new("RGB", (30, 20), "white").save(changed)
        os.utime(changed, ns=(stamp + 10**9, stamp + 10**9))
        module(root, loader="resident", val_size=2).prepare_data()
    (second,) = (root / ".cache").glob("decoded-train-*.pt")  # the stale copy is gone
    assert second != first and "decoding 12 images of" in caplog.text
    dm = module(root, loader="resident", val_size=2)
    dm.setup("fit")
    assert (dm.decoded(dm.train_set.dataset).flatten(1) == 255).all(1).sum() == 1  # the white one


def test_auto_keeps_a_small_folder_resident_and_says_so(photos, caplog):
    with caplog.at_level(logging.INFO):
        assert module(photos).resident
    assert "data: 96 images take 0 MiB decoded at 27 px: kept decoded in memory" in caplog.text


def test_both_loaders_train_to_the_same_accuracy(photos, tmp_path):
    accuracy = {}
    for loader in ("resident", "torch"):
        args = [
            f"--data.root={photos}",
            f"--data.loader={loader}",
            "--data.image_size=24",
            "--data.val_size=12",
        ]
        data = ["--data=ImageFolderDataModule", "--data.batch_size=8", "--trainer.max_epochs=3"]
        # The summary on, as users run it: its example input goes through the DataModule's hooks.
        data += ["--trainer.enable_model_summary=true"]
        data += ["--model.net=FastCNN", "--model.optimizer.lr=0.05"]
        check(run_app("fit", *data, *args, cwd=tmp_path / loader))
        accuracy[loader] = logged(run_folder(tmp_path / loader))["test/acc"][-1]
    assert accuracy["resident"] >= 0.9 and accuracy["torch"] >= 0.9, accuracy


def test_the_batch_crop_draws_a_box_per_image_repeatably_and_mirrors_about_half():
    # 32 copies of one image whose pixels say their column: each crop's columns tell its box.
    columns = torch.arange(64, dtype=torch.uint8).expand(32, 3, 64, 64).contiguous()
    crops = [
        random_resized_crop(columns, 16, (0.08, 1.0), torch.Generator().manual_seed(s)) for s in (1, 1, 2)
    ]
    assert crops[0].shape == (32, 3, 16, 16) and crops[0].dtype == torch.uint8
    assert torch.equal(crops[0], crops[1]) and not torch.equal(crops[0], crops[2])
    assert len({(int(c[0, 0, 0]), int(c[0, 0, -1])) for c in crops[0]}) > 20  # boxes differ per image
    flipped = random_resized_crop(columns, 16, (0.08, 1.0), torch.Generator().manual_seed(1), flip=True)
    mirrored = int((flipped[:, 0, 0, 0] > flipped[:, 0, 0, -1]).sum())  # columns run right to left
    assert 8 <= mirrored <= 24 and (crops[0][:, 0, 0, 0] < crops[0][:, 0, 0, -1]).all()


def test_the_training_crop_reads_its_picks_in_place_and_standardizes_as_normalize_does():
    images = torch.randint(0, 256, (12, 3, 40, 40), dtype=torch.uint8).contiguous(
        memory_format=torch.channels_last
    )
    picks, mean, std = torch.tensor([7, 2, 2, 11, 0]), torch.tensor(IMAGENET_MEAN), torch.tensor(IMAGENET_STD)

    def crops(source: torch.Tensor, **kwargs) -> torch.Tensor:
        generator = torch.Generator().manual_seed(3)
        return random_resized_crop(source, 24, (0.08, 1.0), generator, flip=True, **kwargs)

    uint8 = crops(images[picks])
    assert torch.equal(crops(images, picks=picks), uint8)
    floats = crops(images, picks=picks, standardize=(mean, std))
    assert floats.dtype == torch.float32 and floats.is_contiguous()
    assert torch.equal(floats, normalize(uint8, mean, std))
    expected = (uint8 / 255 - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)  # ToDtype, then Normalize
    assert torch.allclose(floats, expected, atol=1e-5)


def test_crop_boxes_follow_torchvisions_rules():
    top, left, h, w = torch.tensor(crop_boxes(4000, 60, 90, (0.25, 0.5), torch.Generator().manual_seed(0))).T
    assert (top >= 0).all() and (left >= 0).all() and (top + h <= 60).all() and (left + w <= 90).all()
    area, aspect = h * w / (60 * 90), w / h
    assert area.min() > 0.23 and area.max() < 0.52 and aspect.min() > 0.7 and aspect.max() < 1.4
    assert abs(area.float().mean() - 0.375) < 0.01  # uniform over the scale range
    # left spans its whole range: positions are uniform too
    assert left.min() == 0 and (left + w).max() == 90
    # When no draw fits (an area of the whole image, but the image far wider than 4/3), torchvision
    # takes the centre of the image at the nearest allowed aspect; so do we.
    for height, width in ((10, 40), (40, 10), (11, 40)):
        image = torch.zeros(3, height, width)
        expected = list(RandomResizedCrop.get_params(image, [1.0, 1.0], [3 / 4, 4 / 3]))
        assert crop_boxes(3, height, width, (1.0, 1.0), torch.Generator()) == [expected] * 3


@pytest.mark.parametrize("loader", ["resident", "torch"])
def test_an_augmentation_policy_runs_on_both_loaders_repeatably(photos, loader):
    batches = []
    for _ in range(2):
        dm = module(photos, loader=loader, auto_augment="trivialaugment")
        dm.prepare_data()
        dm.setup("fit")
        batches.append(next(iter(dm.train_dataloader()))[0])
    assert batches[0].shape == (8, 3, 24, 24) and torch.equal(batches[0], batches[1])
