"""Image files of any size and mode, prepared as a trained network's evaluation images were.

``--data.predict_dir`` of every DataModule reads its folder through :class:`ImageFiles`, and ``python -m
app serve`` its uploads through :func:`read_image` and :func:`eval_crop`: the steps of
``models.load(path).predict_image``, from the same data card.
"""

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageOps
from torch import Tensor
from torch.utils.data import Dataset
from torchvision.datasets.folder import IMG_EXTENSIONS
from torchvision.transforms import v2

from data.contract import card
from data.errors import DataError, DatasetNotFoundError

# torchvision's ImageFolder suffixes, and GIF, which PIL reads as well (its first frame).
IMAGE_SUFFIXES = (*IMG_EXTENSIONS, ".gif")


class TooManyPixels(DataError):
    """An image larger than the limit it is read under (a decompression bomb, or a huge scan)."""


def is_image(path: str | Path) -> bool:
    """Whether ``path`` has one of the suffixes read as images (``IMAGE_SUFFIXES``, any case)."""
    return str(path).lower().endswith(IMAGE_SUFFIXES)


def read_image(source: bytes | str | Path, channels: int, max_pixels: int | None = None) -> Tensor:
    """The image file ``source`` (its path or its bytes) as a (C, H, W) uint8 tensor: 1 channel (grey)
    or 3 (RGB), whatever its mode, turned upright by its EXIF orientation.

    Raises:
        TooManyPixels: it has more than ``max_pixels`` pixels, found from its header before decoding.
        DataError: it is not an image PIL reads, or it is damaged or cut short.
    """
    name = "the upload" if isinstance(source, bytes) else str(source)
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
            if max_pixels is not None and image.width * image.height > max_pixels:
                raise TooManyPixels(
                    f"{name} is {image.width} x {image.height} pixels, more than the {max_pixels:,} allowed"
                )
            upright = ImageOps.exif_transpose(image)
            pixels = np.array(upright.convert("L" if channels == 1 else "RGB"))
    except Image.DecompressionBombError as err:  # past PIL's own limit, raised while it reads the header
        raise TooManyPixels(f"{name} has more pixels than PIL decodes ({err})") from err
    except (OSError, ValueError, SyntaxError, EOFError) as err:  # PIL's errors for unknown or damaged files
        unknown = isinstance(err, Image.UnidentifiedImageError)
        raise DataError(f"{name} is {'not an image' if unknown else f'damaged or cut short: {err}'}") from err
    tensor = torch.from_numpy(pixels)
    return tensor.unsqueeze(0) if channels == 1 else tensor.permute(2, 0, 1)


def eval_crop(card: Mapping[str, Any]) -> v2.Compose:
    """uint8 image to the uint8 square the network takes: the short side resized to the card's
    ``resize_size`` (else ``image_size``), then the centre ``image_size`` square."""
    size = card["image_size"]
    return v2.Compose([v2.Resize(card.get("resize_size", size), antialias=True), v2.CenterCrop(size)])


def eval_transform(card: Mapping[str, Any]) -> v2.Compose:
    """:func:`eval_crop`, then scaled to [0, 1] and normalized by the card's ``mean`` and ``std``."""
    steps = [eval_crop(card), v2.ToDtype(torch.float32, scale=True), v2.Normalize(card["mean"], card["std"])]
    return v2.Compose(steps)


def trained_card(datamodule: Any) -> dict[str, Any]:
    """The data card of the network that ``datamodule``'s trainer runs: its checkpoint's (``data_card``),
    else the DataModule's own."""
    module = datamodule.trainer.lightning_module if datamodule.trainer is not None else None
    return getattr(module, "data_card", None) or card(datamodule)


class ImageFiles(Dataset):
    """Every image file under ``folder`` (subfolders too), in path order, as (image, -1): no labels.

    Each image is read by :func:`read_image` as ``channels`` channels.
    """

    def __init__(self, folder: str | Path, channels: int) -> None:
        self.folder = Path(folder)
        files = sorted(p for p in self.folder.rglob("*") if is_image(p) and p.is_file())
        if not files:
            raise DatasetNotFoundError(
                f"no images ({', '.join(IMAGE_SUFFIXES)}) in {folder}: pass the folder that holds them "
                f"as --data.predict_dir"
            )
        self.samples = [(str(p), -1) for p in files]
        self.channels = channels

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        path, label = self.samples[i]
        return read_image(path, self.channels), label

    def name(self, i: int) -> str:
        """File ``i``'s path relative to the folder."""
        return Path(self.samples[i][0]).relative_to(self.folder).as_posix()
