"""A photo folder's one augmentation declaration: both loaders' random-resized crops and flips alike.

Every photo is the same square gradient (red = 4 x row, green = 4 x column), the size the resident copy
keeps, so both loaders crop from the same pixels. Each crop's interior pixels give back its box
(bilinear resizing keeps a gradient linear); the two loaders' boxes are compared by a two-sample
Kolmogorov-Smirnov test, their flips against a rate of 1/2.
"""

import math

import numpy as np
import pytest
import torch
from PIL import Image

from data import ImageFolderDataModule

SIDE, SIZE, PHOTOS, EPOCHS = 64, 16, 80, 25  # 78 training photos a epoch: 1950 crops per loader


@pytest.fixture(scope="module")
def gradients(tmp_path_factory):
    root = tmp_path_factory.mktemp("gradients")
    rows, cols = np.meshgrid(np.arange(SIDE), np.arange(SIDE), indexing="ij")
    pixels = np.stack([4 * rows, 4 * cols, np.full_like(rows, 128)], axis=-1).astype(np.uint8)
    for i in range(PHOTOS):
        folder = root / "train" / f"class_{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(folder / f"{i:03d}.png")
    return root


def crops(root, loader: str) -> torch.Tensor:
    """``EPOCHS`` epochs of training crops, back in uint8 (N, 3, SIZE, SIZE)."""
    # crop_ratio 1/4: the resident copy is the photo itself, 64 px square.
    options = {"batch_size": 13, "num_workers": 0, "val_size": 2, "loader": loader}
    dm = ImageFolderDataModule(str(root), SIZE, crop_ratio=0.25, **options)
    dm.prepare_data()
    dm.setup("fit")
    train, batches = dm.train_dataloader(), []
    for epoch in range(EPOCHS):
        train.sampler.set_epoch(epoch)
        batches += [dm.on_after_batch_transfer(batch, 0)[0] for batch in train]  # normalized, as in a step
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in (dm.mean, dm.std))
    return ((torch.cat(batches) * std + mean) * 255).round()


def boxes(images: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each crop's box in the photo, from the gradient at its rows (columns) 4 and 11, and its flip."""
    # Output pixel i samples the photo at top + (i + 1/2) h / SIZE - 1/2.
    rows = images[:, 0, [4, 11], :].mean(-1) / 4
    cols = images[:, 1, :, [4, 11]].mean(-2) / 4
    h, w = (rows[:, 1] - rows[:, 0]) * SIZE / 7, (cols[:, 1] - cols[:, 0]).abs() * SIZE / 7
    return {
        "area": h * w / SIDE**2,
        "log aspect": (w / h).log(),
        "top": rows[:, 0] + 0.5 - 4.5 * h / SIZE,
        "bottom": rows[:, 0] + 0.5 - 4.5 * h / SIZE + h,
        "flipped": cols[:, 1] < cols[:, 0],
    }


def ks_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest gap between the empirical distribution functions of ``a`` and ``b``."""
    grid = torch.cat([a, b]).sort().values
    cdf = [torch.searchsorted(x.sort().values, grid, right=True) / len(x) for x in (a, b)]
    return (cdf[0] - cdf[1]).abs().max().item()


def test_both_loaders_draw_crops_of_the_same_areas_aspects_and_places_and_flip_half(gradients):
    resident, classic = (boxes(crops(gradients, loader)) for loader in ("resident", "torch"))
    n = len(resident["area"])
    assert n == len(classic["area"]) == EPOCHS * (PHOTOS - 2)
    for drawn in (resident, classic):
        # --data.crop_scale (0.08, 1) and aspect 3/4 to 4/3, give or take the read-back's half pixel.
        assert 0.07 < drawn["area"].min() < 0.1 and 0.95 < drawn["area"].max() < 1.03
        assert drawn["log aspect"].abs().max() < math.log(4 / 3) + 0.08
        assert drawn["top"].min() > -0.7 and drawn["bottom"].max() < SIDE + 0.7
        assert abs(drawn["flipped"].float().mean() - 0.5) < 5 * math.sqrt(0.25 / n)
    critical = 1.95 * math.sqrt(2 / n)  # the test's threshold at a 0.1 % false alarm rate
    for name in ("area", "log aspect", "top"):
        assert ks_distance(resident[name], classic[name]) < critical, name
