"""The pictures themselves: a confusion matrix, a grid of titled samples, the curves (matplotlib)."""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor
from torch.nn import functional as F
from torchmetrics.classification import MulticlassConfusionMatrix
from torchvision.utils import make_grid

CURVES = {"loss": ("train/loss", "val/loss"), "accuracy": ("val/acc",)}
TEXT_UP_TO = 20  # classes: beyond, counts and names in the matrix's cells would be unreadable
CELL_INCHES, TITLE_INCHES, GAP = 1.6, 0.35, 2  # sample grid: image width, title band, pixels between


@dataclass(frozen=True)
class Sketch:
    """What one validation's pictures are drawn from: plain CPU data, sent to the drawing process."""

    matrix: np.ndarray
    epoch: int
    names: list[str]
    mean: Sequence[float] | None
    std: Sequence[float] | None
    shown: tuple[np.ndarray, list[int], list[int]] | None  # images, preds, labels


def draw(sketch: Sketch) -> dict[str, np.ndarray]:
    """The pictures of one validation as (H, W, 3) uint8 arrays, by logger key."""
    names = sketch.names
    figures = {"val/confusion_matrix": matrix_figure(torch.from_numpy(sketch.matrix), sketch.epoch, names)}
    if sketch.shown is not None:
        images, preds, labels = sketch.shown
        grid = grid_figure(
            torch.from_numpy(images),
            torch.tensor(preds),
            torch.tensor(labels),
            names,
            sketch.mean,
            sketch.std,
        )
        figures["val/samples"] = grid
    return {key: _pixels(fig) for key, fig in figures.items()}


def matrix_figure(matrix: Tensor, epoch: int, names: Sequence[str]) -> Figure:
    """A confusion matrix, counts written in the cells if there are few classes."""
    n = len(matrix)
    few = n <= TEXT_UP_TO
    fig = _figure(2 + 0.7 * min(n, 26), 2 + 0.7 * min(n, 26))
    labels = _first(names, n) if few else None
    MulticlassConfusionMatrix(n).plot(matrix, ax=fig.add_subplot(), add_text=few, labels=labels)
    fig.suptitle(f"validation, epoch {epoch}: {int(matrix.sum())} samples")
    return fig


def grid_figure(
    images: Tensor,
    preds: Tensor,
    labels: Tensor,
    names: Sequence[str],
    mean: Sequence[float] | None,
    std: Sequence[float] | None,
) -> Figure:
    """A grid of ``images`` titled with predicted and true class; wrong ones in red.

    One picture (torchvision's ``make_grid``) with a white band above each image for its title:
    as 32 subplots, matplotlib took about a second per validation to lay it out.
    """
    names = _first(names, 1 + max(int(preds.max()), int(labels.max())))
    cols = min(8, len(images))
    height, width = images.shape[-2:]
    inches = CELL_INCHES / (width + GAP)  # per pixel of the grid
    band = math.ceil(TITLE_INCHES / inches)
    shown = torch.stack([_displayable(image, mean, std) for image in images])
    grid = make_grid(F.pad(shown, (0, 0, band, 0), value=1.0), nrow=cols, padding=GAP, pad_value=1.0)
    fig = _figure(grid.shape[2] * inches, grid.shape[1] * inches, layout=None)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.imshow(grid.permute(1, 2, 0).numpy(), interpolation="nearest")
    for i, (pred, label) in enumerate(zip(preds.tolist(), labels.tolist(), strict=True)):
        row, col = divmod(i, cols)
        x = GAP + col * (width + GAP) + width / 2
        y = GAP + row * (height + band + GAP) + band / 2
        wrong = pred != label
        title = f"{'✗ ' if wrong else ''}pred {names[pred]}\ntrue {names[label]}"
        ax.text(x, y, title, ha="center", va="center", fontsize=8, color="red" if wrong else "black")
    return fig


def curves_figure(history: Mapping[int, Mapping[str, float]]) -> Figure:
    """One panel per entry of :data:`CURVES`, each metric against the epoch."""
    fig = _figure(5 * len(CURVES), 4)
    axes = fig.subplots(1, len(CURVES), squeeze=False).flat
    for ax, (title, keys) in zip(axes, CURVES.items(), strict=True):
        for key in keys:
            epochs = [epoch for epoch in sorted(history) if key in history[epoch]]
            ax.plot(epochs, [history[epoch][key] for epoch in epochs], "o-", label=key)
        ax.set(title=title, xlabel="epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    return fig


def _figure(width: float, height: float, layout: str | None = "constrained") -> Figure:
    # Not pyplot's: no backend is picked (nor a display sought), and the figure is freed with its last
    # reference instead of being kept by pyplot until closed.
    fig = Figure(figsize=(width, height), dpi=100, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def _pixels(fig: Figure) -> np.ndarray:
    """The figure rendered as an (H, W, 3) uint8 array."""
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def _first(names: Sequence[str], n: int) -> list[str]:
    """``n`` class names: the known ones, then indices."""
    return list(names[:n]) + [str(i) for i in range(len(names), n)]


def _displayable(image: Tensor, mean: Sequence[float] | None, std: Sequence[float] | None) -> Tensor:
    """A normalized (C, H, W) image as 1 or 3 channels of floats in [0, 1]."""
    image = image[:3] if len(image) >= 3 else image[:1]
    if mean is not None and std is not None and len(mean) >= len(image) and len(std) >= len(image):
        image = image * image.new_tensor(std[: len(image)])[:, None, None]
        image = image + image.new_tensor(mean[: len(image)])[:, None, None]
    else:
        image = (image - image.min()) / (image.max() - image.min()).clamp(min=1e-12)
    return image.clamp(0, 1)
