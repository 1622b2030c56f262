"""--data.sampler balanced: each class drawn equally often, in an order independent of the world size."""

import math

import pytest
import torch
from helpers.data_files import write_image_folder

from data import MNISTDataModule
from data.samplers import BalancedSampler


def global_order(labels: torch.Tensor, world: int, epoch: int) -> list[int]:
    """The epoch's samples in the order the ranks' shards interleave to, padding included."""
    shards = []
    for rank in range(world):
        sampler = BalancedSampler(range(len(labels)), world, rank, seed=3, labels=labels)
        sampler.set_epoch(epoch)
        shards.append(list(sampler))
    assert len({len(shard) for shard in shards}) == 1  # every rank runs the same number of steps
    return [shards[i % world][i // world] for i in range(world * len(shards[0]))]


def test_the_balanced_order_depends_on_seed_and_epoch_not_on_the_world_size():
    labels = torch.tensor([0] * 5 + [1] * 40 + [2] * 56)
    for epoch in (0, 1):
        alone = global_order(labels, 1, epoch)
        for world in (2, 3, 4):
            shared = global_order(labels, world, epoch)
            # Padded as DistributedSampler pads: with the first samples of the epoch.
            assert shared == (alone + alone)[: len(shared)]
    assert global_order(labels, 1, 0) != global_order(labels, 1, 1)


def within_noise(counts: torch.Tensor, draws: int) -> bool:
    """Whether each class's count is within 4 standard deviations of its binomial (draws, 1 / classes):
    a truly balanced draw fails this with a probability under 1e-3."""
    p = 1 / len(counts)
    return bool(((counts - draws * p).abs() <= 4 * math.sqrt(draws * p * (1 - p))).all())


def epoch_labels(dm, epoch: int) -> torch.Tensor:
    loader = dm.train_dataloader()
    loader.sampler.set_epoch(epoch)
    return torch.cat([labels for _, labels in loader])


def test_each_epoch_draws_every_class_about_equally_on_both_loaders(imbalanced_mnist_root):
    options = {"root": str(imbalanced_mnist_root), "download": False, "batch_size": 32, "num_workers": 0}
    kept = MNISTDataModule(**options, val_size=0.2)
    kept.setup("fit")
    data = torch.bincount(epoch_labels(kept, 0), minlength=10)  # shuffle: every sample once, unbalanced
    assert data.tolist() == torch.bincount(kept.labels(kept.train_set), minlength=10).tolist()
    assert data[:5].max() < 15 and data[5:].min() > 65
    epochs = {}
    for loader in ("resident", "torch"):
        dm = MNISTDataModule(**options, val_size=0.2, sampler="balanced", loader=loader)
        dm.setup("fit")
        epochs[loader] = [epoch_labels(dm, epoch) for epoch in (0, 1)]
        for labels in epochs[loader]:
            assert len(labels) == len(dm.train_set) == data.sum()  # as many steps as shuffle
            assert within_noise(torch.bincount(labels, minlength=10), len(labels))
    assert all(torch.equal(a, b) for a, b in zip(*epochs.values(), strict=True))  # the same draws
    assert not torch.equal(*epochs["resident"])  # drawn anew each epoch


@pytest.mark.parametrize("loader", ["resident", "torch"])
def test_an_image_folder_is_balanced_too(loader, tmp_path):
    root = write_image_folder(tmp_path / "images", classes=3, per_class=12)
    for extra in sorted((root / "train" / "class_0").iterdir())[3:]:
        extra.unlink()  # 3 images of class 0, 12 of the others
    from data import ImageFolderDataModule

    dm = ImageFolderDataModule(
        str(root), batch_size=8, num_workers=0, val_size=3, sampler="balanced", loader=loader
    )
    dm.prepare_data()
    dm.setup("fit")
    labels = torch.cat([epoch_labels(dm, epoch) for epoch in range(20)])
    assert len(labels) == 20 * 24
    assert within_noise(torch.bincount(labels, minlength=3), len(labels))
