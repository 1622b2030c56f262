"""The pictures themselves: a grid of titled samples and a confusion matrix (PIL), the curves (matplotlib).

The grid and the matrix are drawn with PIL, in about 20 ms each: matplotlib took about 0.2 s for each
(1 to 2 ms a text, and a layout pass), which on 2 CPU cores was 3 % of a 2-epoch fit. Nothing here
calls torch, since they are drawn in a thread beside training (see ``ValidationPictures``).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from PIL import Image, ImageDraw, ImageFont

CURVES = {"loss": ("train/loss", "val/loss"), "accuracy": ("val/acc",)}
TEXT_UP_TO = 20  # classes: beyond, counts and names in the matrix's cells would be unreadable
CELL, TITLE = 160, 35  # sample grid: picture pixels of an image with its gap, and of its title band
GAP = 2  # sample grid: grid pixels between images
FONT = Path(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf")  # matplotlib's own, which has ✗
PNG_LEVEL = 1  # zlib level: a third less time than PIL's default 6, for about a quarter more bytes


@dataclass(frozen=True)
class Sketch:
    """What one validation's pictures are drawn from: plain CPU data, for the drawing thread."""

    matrix: np.ndarray
    epoch: int
    step: int  # the global step they are logged at; names their files
    names: list[str]
    mean: Sequence[float] | None
    std: Sequence[float] | None
    shown: tuple[np.ndarray, list[int], list[int]] | None  # images, preds, labels


def draw(sketch: Sketch, folder: str) -> dict[str, str]:
    """Writes the pictures of one validation as PNG files into ``folder``; their paths by logger key."""
    pictures = {"val/confusion_matrix": matrix_picture(sketch.matrix, sketch.epoch, sketch.names)}
    if sketch.shown is not None:
        images, preds, labels = sketch.shown
        pictures["val/samples"] = grid_picture(images, preds, labels, sketch.names, sketch.mean, sketch.std)
    paths = {}
    for key, picture in pictures.items():
        paths[key] = str(Path(folder, f"{key.replace('/', '-')}-{sketch.step}.png"))
        picture.save(paths[key], compress_level=PNG_LEVEL)
    return paths


def grid_picture(
    images: np.ndarray,
    preds: Sequence[int],
    labels: Sequence[int],
    names: Sequence[str],
    mean: Sequence[float] | None,
    std: Sequence[float] | None,
) -> Image.Image:
    """A grid of ``images`` (N, C, H, W) titled with predicted and true class; wrong ones in red.

    Each image has a white band above it for its title and ``GAP`` white pixels around it; the grid
    is scaled so that an image and its gap are ``CELL`` pixels wide.
    """
    names = _first(names, 1 + max(*preds, *labels))
    cols = min(8, len(images))
    height, width = images.shape[-2:]
    scale = CELL / (width + GAP)  # picture pixels per grid pixel
    band = math.ceil(TITLE / scale)
    rows = math.ceil(len(images) / cols)
    grid = np.ones((rows * (band + height + GAP) + GAP, cols * (width + GAP) + GAP, 3))  # white
    for i, image in enumerate(images):
        row, col = divmod(i, cols)
        top, left = GAP + row * (band + height + GAP) + band, GAP + col * (width + GAP)
        grid[top : top + height, left : left + width] = _displayable(image, mean, std).transpose(1, 2, 0)
    size = (round(grid.shape[1] * scale), round(grid.shape[0] * scale))
    resample = Image.Resampling.NEAREST if scale >= 1 else Image.Resampling.BOX
    picture = Image.fromarray((grid * 255).round().astype(np.uint8)).resize(size, resample)
    pen, font = ImageDraw.Draw(picture), ImageFont.truetype(FONT, 11)
    for i, (pred, label) in enumerate(zip(preds, labels, strict=True)):
        row, col = divmod(i, cols)
        x = GAP + col * (width + GAP) + width / 2
        y = GAP + row * (height + band + GAP) + band / 2
        color = "black" if pred == label else "red"
        text = title(pred, label, names)
        pen.multiline_text((x * scale, y * scale), text, color, font, "mm", align="center")
    return picture


def title(pred: int, label: int, names: Sequence[str]) -> str:
    """A sample's title: its predicted and true class, marked if they differ."""
    return f"{'✗ ' if pred != label else ''}pred {names[pred]}\ntrue {names[label]}"


def matrix_picture(matrix: np.ndarray, epoch: int, names: Sequence[str]) -> Image.Image:
    """A confusion matrix (rows true, columns predicted), with counts and names if there are few classes."""
    n, pad = len(matrix), 10
    few = n <= TEXT_UP_TO
    cell = max(4, min(70, 1400 // n))
    font, small = ImageFont.truetype(FONT, 16), ImageFont.truetype(FONT, 12)
    ticks = _first(names, n) if few else [str(i) for i in range(n)]
    ticked = range(0, n, 1 if few else math.ceil(n / 20))
    xs = {i: _text_mask(ticks[i], small, 45) for i in ticked}
    ys = {i: _text_mask(ticks[i], small, 25) for i in ticked}
    true_class = _text_mask("True class", font, 90)
    left = pad + true_class.width + pad + max(m.width for m in ys.values()) + 6
    top, bottom = 3 * pad + 20, max(m.height for m in xs.values()) + 3 * pad + 28
    side = n * cell
    picture = Image.new("RGB", (left + side + 4 * pad, top + side + bottom), "white")
    lut = np.asarray(colormaps["viridis"](np.linspace(0, 1, 256))[:, :3] * 255).round().astype(np.uint8)
    shade = np.asarray(matrix, dtype=np.int64) * 255 // max(int(matrix.max()), 1)
    picture.paste(Image.fromarray(lut[shade]).resize((side, side), Image.Resampling.NEAREST), (left, top))
    for i in ticked:
        mask, middle = ys[i], top + i * cell + cell // 2
        picture.paste("black", (left - 6 - mask.width, middle - mask.height // 2), mask)
        mask, middle = xs[i], left + i * cell + cell // 2
        picture.paste("black", (middle - mask.width, top + side + 6), mask)
    picture.paste("black", (pad, top + (side - true_class.height) // 2), true_class)
    pen = ImageDraw.Draw(picture)
    heading = f"validation, epoch {epoch}: {int(matrix.sum())} samples"
    pen.text((left + side / 2, pad), heading, "black", font, "mt")
    pen.text((left + side / 2, picture.height - pad), "Predicted class", "black", font, "mb")
    if few:
        light = (lut[shade] * (0.299, 0.587, 0.114)).sum(axis=2) > 128
        for (row, col), count in np.ndenumerate(matrix):
            middle = (left + (col + 0.5) * cell, top + (row + 0.5) * cell)
            pen.text(middle, str(int(count)), "black" if light[row, col] else "white", font, "mm")
    return picture


def curves_figure(history: Mapping[int, Mapping[str, float]]) -> Figure:
    """One panel per entry of :data:`CURVES`, each metric against the epoch."""
    # Not pyplot's: no backend is picked (nor a display sought), and the figure is freed with its last
    # reference instead of being kept by pyplot until closed. Fixed margins: a layout engine doubles the time.
    fig = Figure(figsize=(5 * len(CURVES), 4), dpi=100)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.13, top=0.92, wspace=0.2)
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


def _text_mask(text: str, font: ImageFont.FreeTypeFont, angle: float) -> Image.Image:
    """``text`` as an 8-bit mask turned ``angle`` degrees anticlockwise, for ``Image.paste``."""
    left, top, right, bottom = font.getbbox(text)
    mask = Image.new("L", (right - left + 2, bottom - top + 2))
    ImageDraw.Draw(mask).text((1 - left, 1 - top), text, 255, font)
    return mask.rotate(angle, Image.Resampling.BICUBIC, expand=True)


def _first(names: Sequence[str], n: int) -> list[str]:
    """``n`` class names: the known ones, then indices."""
    return list(names[:n]) + [str(i) for i in range(len(names), n)]


def _displayable(image: np.ndarray, mean: Sequence[float] | None, std: Sequence[float] | None) -> np.ndarray:
    """A normalized (C, H, W) image as 1 or 3 channels of floats in [0, 1]."""
    image = image[:3] if len(image) >= 3 else image[:1]
    channels = len(image)
    if mean is not None and std is not None and len(mean) >= channels and len(std) >= channels:
        image = image * np.asarray(std[:channels])[:, None, None] + np.asarray(mean[:channels])[:, None, None]
    else:
        image = (image - image.min()) / max(image.max() - image.min(), 1e-12)
    return image.clip(0, 1)
