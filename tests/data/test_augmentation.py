"""One augmentation declaration, two loaders: their training batches are drawn from the same distribution.

Every training image is the same marker image, whose pixels say their row and column, so each augmented
sample tells its crop offset and its flips. Many samples through the resident loader and through the
DataLoader path are compared with what the declared transforms draw, within five standard errors.
"""

import logging
import math
import pickle

import numpy as np
import pytest
import torch
from torchvision.transforms import v2

from data import CIFAR10DataModule
from data.augment import resident_transform

PER_FILE, N_TRAIN, EPOCHS = 220, 1000, 2  # 1100 images, 100 held out; 2000 samples per loader


def write_marker_cifar(root):
    """CIFAR-10's files, every image red = 8 x row + 4, green = 8 x column + 4, blue = 255."""
    rows, cols = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    planes = np.stack([8 * rows + 4, 8 * cols + 4, np.full((32, 32), 255)]).astype(np.uint8)
    data = np.ascontiguousarray(np.broadcast_to(planes.reshape(1, -1), (PER_FILE, 3072)))
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (folder / name).write_bytes(pickle.dumps({"data": data, "labels": [i % 10 for i in range(PER_FILE)]}))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"c{i}" for i in range(10)]}))
    return root


@pytest.fixture(scope="module")
def marker_root(tmp_path_factory):
    return write_marker_cifar(tmp_path_factory.mktemp("marker"))


def samples(dm: CIFAR10DataModule) -> torch.Tensor:
    """The training batches of ``EPOCHS`` epochs, back in uint8 (N, 3, 32, 32)."""
    dm.setup("fit")
    loader = dm.train_dataloader()
    batches = []
    for epoch in range(EPOCHS):
        loader.sampler.set_epoch(epoch)  # as Lightning does
        batches += [images for images, _ in loader]
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in (dm.mean, dm.std))
    return ((torch.cat(batches) * std + mean) * 255).round().to(torch.uint8)


def module(kind: type, root, loader: str) -> CIFAR10DataModule:
    options = {"download": False, "verify": False, "batch_size": 50, "num_workers": 0}
    return kind(str(root), val_size=5 * PER_FILE - N_TRAIN, loader=loader, **options)


def assert_rate(hits: torch.Tensor, p: float) -> None:
    """``hits`` (booleans) occur at rate ``p``, within five standard errors."""
    n = len(hits)
    assert abs(hits.float().mean().item() - p) < 5 * math.sqrt(p * (1 - p) / n), (hits.float().mean(), p)


@pytest.mark.parametrize("loader", ["resident", "torch"])
def test_cifar_crop_offsets_are_uniform_and_half_the_images_are_flipped(marker_root, loader):
    images = samples(module(CIFAR10DataModule, marker_root, loader)).int()
    assert len(images) == EPOCHS * N_TRAIN
    # Pixel (16, 16) always lies inside the image (offsets are at most 4): its row and column.
    row, col = (images[:, :2, 16, 16] - 4).T // 8
    flipped = images[:, 1, 16, 17] < images[:, 1, 16, 16]  # the columns run right to left
    dy, dx = row - 12, torch.where(flipped, col - 11, col - 12)  # crop offset in the padded image
    assert_rate(flipped, 0.5)
    for offsets in (dy, dx):
        assert set(offsets.tolist()) == set(range(9))  # padding 4: nine offsets, none outside
        for k in range(9):
            assert_rate(offsets == k, 1 / 9)
    # Independent draws: the 81 (dy, dx) cells are equally likely (chi-square, 80 degrees of freedom).
    counts = torch.bincount(dy * 9 + dx, minlength=81).float()
    expected = len(dy) / 81
    assert ((counts - expected) ** 2 / expected).sum() < 80 + 5 * math.sqrt(2 * 80)
    # Everything else is the marker: real pixels keep blue 255, padding is 0 in every channel.
    padding = (images[:, 2] == 0).unsqueeze(1)
    assert ((images[:, 2:] == 255) | padding).all() and (images[:, :2] * padding == 0).all()


class MyData(CIFAR10DataModule):
    """A data set of one's own declaring its augmentation once: a batch kernel with p other than 1/2,
    and a transform with none (run image by image in the resident loader)."""

    def augmentation(self) -> list:
        return [v2.RandomVerticalFlip(p=0.25), v2.RandomInvert(p=0.5)]


@pytest.mark.parametrize("loader", ["resident", "torch"])
def test_an_augmentation_of_ones_own_runs_on_both_loaders_at_its_rates(marker_root, loader):
    images = samples(module(MyData, marker_root, loader)).int()
    inverted = images[:, 2, 0, 0] == 0  # blue 255 becomes 0
    images = torch.where(inverted.view(-1, 1, 1, 1), 255 - images, images)
    upside_down = images[:, 0, 1, 0] < images[:, 0, 0, 0]  # the rows run bottom to top
    assert_rate(inverted, 0.5)
    assert_rate(upside_down, 0.25)
    assert_rate(inverted & upside_down, 0.125)  # drawn independently
    marker = torch.from_numpy(np.stack(np.meshgrid(np.arange(32), np.arange(32), indexing="ij"))) * 8 + 4
    expected = torch.where(upside_down.view(-1, 1, 1, 1), marker.flip(-2), marker)
    assert torch.equal(images[:, :2], expected)  # no other change


def test_the_resident_batches_repeat_for_a_batch_seed(marker_root):
    """Each batch's draws come from its own generator (seed, epoch, rank, batch): a second pass is equal."""
    first, second = (samples(module(MyData, marker_root, "resident")) for _ in range(2))
    assert torch.equal(first, second)


def test_the_resident_loader_says_which_transforms_run_image_by_image(caplog):
    mean, std = torch.tensor([0.5]), torch.tensor([0.25])
    caplog.set_level(logging.INFO)
    resident_transform([v2.RandomCrop(28, padding=4), v2.RandomHorizontalFlip()], mean, std)
    assert "image by image" not in caplog.text  # all on whole batches
    resident_transform([v2.RandomRotation(10), v2.RandomHorizontalFlip(), v2.ColorJitter(0.2)], mean, std)
    assert "resident loader: RandomRotation, ColorJitter run image by image" in caplog.text
