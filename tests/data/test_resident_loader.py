"""The resident loader: sharding, reshuffling, batch augmentation, and agreement with the DataLoader path."""

import pytest
import torch
from helpers.cli import check, load_probe, logged, max_difference, probe, run_app, run_folder
from torch.utils.data import DistributedSampler

from data import CIFAR10DataModule, FashionMNISTDataModule, MNISTDataModule
from data.batch_transforms import random_crop, random_flip
from data.resident import ResidentLoader


def epoch(n: int, world: int, rank: int, batch: int, epoch_number: int = 0) -> list[torch.Tensor]:
    """Label batches of one epoch of rank ``rank``; label i is sample i."""
    labels = torch.arange(n)
    images = torch.zeros(n, 1, 2, 2, dtype=torch.uint8)
    sampler = DistributedSampler(range(n), world, rank, shuffle=True, seed=7)
    sampler.set_epoch(epoch_number)
    loader = ResidentLoader(images, labels, batch, sampler, lambda x, i, g: x[i].float())
    batches = [y for _, y in loader]
    assert len(batches) == len(loader)
    return batches


@pytest.mark.parametrize(("n", "world"), [(120, 3), (101, 2), (37, 4)])
def test_every_sample_once_per_epoch_across_ranks_and_equal_steps(n, world):
    shards = [epoch(n, world, rank, batch=8) for rank in range(world)]
    assert len({len(batches) for batches in shards}) == 1, "ranks would run different step counts"
    seen = torch.cat([torch.cat(batches) for batches in shards])
    assert set(seen.tolist()) == set(range(n))
    assert len(seen) - n == (-n) % world  # the only repeats: padding to equal shards


def test_reshuffled_each_epoch_and_repeatable():
    first, second = torch.cat(epoch(64, 2, 0, 16, 0)), torch.cat(epoch(64, 2, 0, 16, 1))
    assert not torch.equal(first, second)
    assert torch.equal(first, torch.cat(epoch(64, 2, 0, 16, 0)))


def test_random_crop_is_a_shifted_window_of_the_padded_image():
    g = torch.Generator().manual_seed(0)
    images = torch.randint(1, 255, (50, 3, 8, 8), dtype=torch.uint8)
    cropped = random_crop(images, 2, g)
    padded = torch.nn.functional.pad(images, (2, 2, 2, 2))
    offsets = set()
    for image, crop in zip(padded, cropped, strict=True):
        matches = [
            (y, x) for y in range(5) for x in range(5) if torch.equal(image[:, y : y + 8, x : x + 8], crop)
        ]
        assert matches
        offsets.add(matches[0])
    assert len(offsets) > 10  # offsets vary per image


def test_random_flip_mirrors_about_half():
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 255, (1000, 1, 4, 4), dtype=torch.uint8)
    flipped = random_flip(images, g)
    mirrored = (flipped == images.flip(-1)).flatten(1).all(1)
    assert ((flipped == images).flatten(1).all(1) | mirrored).all()
    assert 400 < mirrored.sum() < 600


@pytest.mark.parametrize(
    ("module", "root"), [(MNISTDataModule, "mnist_root"), (CIFAR10DataModule, "cifar10_root")]
)
def test_both_loaders_see_the_same_samples_in_the_same_order(module, root, request):
    kwargs = {
        "root": str(request.getfixturevalue(root)),
        "download": False,
        "batch_size": 32,
        "num_workers": 0,
        "val_size": 0.2,
    }
    if module is CIFAR10DataModule:
        kwargs["verify"] = False
    resident, classic = module(**kwargs, loader="resident"), module(**kwargs, loader="torch")
    for dm in (resident, classic):
        dm.setup("fit")
    train = [list(dm.train_dataloader()) for dm in (resident, classic)]
    assert all(torch.equal(a[1], b[1]) for a, b in zip(*train, strict=True))
    val = [list(dm.val_dataloader()) for dm in (resident, classic)]
    for (xa, ya), (xb, yb) in zip(*val, strict=True):
        assert torch.equal(ya, yb) and torch.allclose(xa, xb, atol=1e-5)  # same normalization


@pytest.mark.parametrize("loader", ["resident", "torch"])
def test_fashion_mnist_flip_mirrors_about_half_the_training_images(loader, fashion_mnist_root):
    kwargs = {"root": str(fashion_mnist_root), "download": False, "num_workers": 0, "val_size": 0.2}
    kwargs["loader"] = loader
    plain, flipped = FashionMNISTDataModule(**kwargs), FashionMNISTDataModule(**kwargs, flip=True)
    for dm in (plain, flipped):
        dm.setup("fit")
    mirrored = asymmetric = 0
    for (xa, ya), (xb, yb) in zip(plain.train_dataloader(), flipped.train_dataloader(), strict=True):
        assert torch.equal(ya, yb)
        same = torch.isclose(xb, xa, atol=1e-6).flatten(1).all(1)
        mirror = torch.isclose(xb, xa.flip(-1), atol=1e-6).flatten(1).all(1)
        assert (same | mirror).all()
        asymmetric += int((~same | ~mirror).sum())
        mirrored += int((mirror & ~same).sum())
    assert 0.35 < mirrored / asymmetric < 0.65
    val = zip(plain.val_dataloader(), flipped.val_dataloader(), strict=True)
    assert all(torch.equal(xa, xb) for (xa, _), (xb, _) in val)  # validation is never flipped


def test_both_loaders_train_to_the_same_weights_and_accuracy(mnist_root, tmp_path):
    """MNIST has no augmentation: same samples, same order, same pixels, so the same training."""
    for loader in ("resident", "torch"):
        args = [f"--data.root={mnist_root}", f"--data.loader={loader}", probe(tmp_path / loader)]
        check(run_app("fit", *args, "--trainer.max_epochs=2", cwd=tmp_path / loader))
    resident, classic = (
        load_probe(tmp_path / loader, "end", 0)["weights"] for loader in ("resident", "torch")
    )
    assert max_difference(resident, classic) < 1e-4
    accuracy = [logged(run_folder(tmp_path / loader))["test/acc"] for loader in ("resident", "torch")]
    assert accuracy[0] == accuracy[1]
