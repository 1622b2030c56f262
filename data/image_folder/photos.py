"""Photos of any size and mode as uint8 tensors, their augmentation and evaluation crops (aspect kept)."""

import collections
import functools
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_info
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError
from torch import Tensor
from torch.utils.data import default_collate
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from data.batch_transforms import normalize
from data.predict_files import IMAGE_SUFFIXES, is_image
from data.resident import BatchTransform
from data.vision import DataError

# torchvision's and timm's ImageNet statistics: the usual ones for RGB photos. One grey channel
# takes their mean over the colours.
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

AutoAugment = Literal["none", "trivialaugment", "randaugment", "autoaugment"]


@functools.cache
def jpeg_decoder() -> Callable[..., Tensor] | None:
    """torchcodec's JPEG decoder (torchvision.io's successor); None where its build does not load."""
    try:
        from torchcodec.decoders import decode_jpeg
    except (ImportError, OSError, RuntimeError):  # not installed, or built for another torch
        return None
    return decode_jpeg


def read_photo(path: str | Path, short_side: int | None = None, grey: bool = False) -> Tensor:
    """The image file ``path`` as a (C, H, W) uint8 tensor, 1 channel if ``grey`` else RGB.

    Grey, RGBA, palette and CMYK files are converted, and photos turned upright by their EXIF
    orientation. A JPEG is decoded straight at a 1/2, 1/4 or 1/8 scale where its short side stays
    at least ``short_side``: PIL's ``draft`` scales in the DCT, which torchcodec cannot. Other
    upright RGB or grey JPEGs go to torchcodec: the same pixels, 1.4x as fast as PIL on a
    500x375 photo (0.76 ms against 1.1), as it decodes straight into the tensor.
    """
    try:
        encoded = Path(path).read_bytes()  # read once: PIL reads its header, a decoder the rest
        with Image.open(io.BytesIO(encoded)) as image:
            scale = short_side / min(image.size) if short_side else 1
            upright = image.getexif().get(ExifTags.Base.Orientation, 1) == 1
            jpeg, decode_jpeg = image.format == "JPEG", jpeg_decoder()
            if jpeg and scale > 0.5 and upright and image.mode in ("RGB", "L") and decode_jpeg:
                try:
                    return decode_jpeg(encoded, mode="GRAY" if grey else "RGB")
                except RuntimeError:  # a damaged file: PIL's reading below says what is wrong
                    pass
            # draft slows a decode it cannot scale (0.98 ms against 1.54 for a 500x375 JPEG), unless it
            # spares the colours of a grey read.
            if jpeg and (scale <= 0.5 or grey):
                image.draft("L" if grey else "RGB", (image.width * scale, image.height * scale))
            if not upright:  # a camera's sideways photo
                image = ImageOps.exif_transpose(image)  # upright, as viewers show it
            mode = "L" if grey else "RGB"
            if image.mode != mode:
                image = image.convert(mode)
            pixels = np.array(image)  # writable, for torch (convert would copy an image already in mode)
    except (OSError, ValueError, SyntaxError) as err:  # PIL's errors for unknown and damaged files
        unknown = isinstance(err, UnidentifiedImageError)
        why = "not an image format PIL reads" if unknown else f"damaged or cut short: {err}"
        raise DataError(f"cannot read the image {path} ({why}): delete or replace it") from err
    tensor = torch.from_numpy(pixels)
    return tensor.unsqueeze(0) if grey else tensor.permute(2, 0, 1)


def skipped_line(folder: Path, names: list[str]) -> str:
    """One line counting the files of ``folder`` that are not read as images, by kind."""
    kinds = collections.Counter(Path(name).suffix.lower() or name for name in names)
    counts = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    return (
        f"{folder}: skipped {len(names)} file(s) that are not images ({counts}); "
        f"images are {' '.join(IMAGE_SUFFIXES)}"
    )


@dataclass(frozen=True)
class Unreadable:
    """What the folder's data set gives in place of an image it cannot read: ``TransformedSubset`` passes
    it on untransformed (``unreadable``), for :func:`collate_readable` to drop from its batch.

    Attributes:
        path: the image file.
        why: the one-line error reading it raised.
    """

    path: str
    why: str
    unreadable: ClassVar[bool] = True


class PhotoFolder(ImageFolder):
    """``ImageFolder`` of uint8 tensors; other files are skipped, with a count in one log line.

    An image that cannot be decoded raises a :class:`DataError` naming it, or, with ``skip``, comes as an
    :class:`Unreadable` (its label kept beside it, for :func:`collate_readable` to drop both).
    """

    def __init__(self, folder: Path, short_side: int | None, grey: bool, skip: bool = False) -> None:
        skipped: list[str] = []

        def valid(path: str) -> bool:
            if is_image(path):
                return True
            skipped.append(Path(path).name)
            return False

        super().__init__(folder, loader=self.read, is_valid_file=valid)
        self.short_side, self.grey, self.skip = short_side, grey, skip
        if skipped:
            rank_zero_info(skipped_line(folder, skipped))

    def read(self, path: str) -> Tensor | Unreadable:
        try:
            return read_photo(path, self.short_side, self.grey)
        except DataError as err:
            if self.skip:
                return Unreadable(path, str(err))
            raise DataError(f"{err}, or pass --data.skip_unreadable true to leave such images out") from err


def collate_readable(samples: list[tuple[Any, int]]) -> tuple[Tensor, Tensor, list[Unreadable]]:
    """A batch of the readable ``samples`` (images, labels), and the :class:`Unreadable` ones left out."""
    left_out = [image for image, _ in samples if isinstance(image, Unreadable)]
    kept = [sample for sample in samples if not isinstance(sample[0], Unreadable)]
    if not kept:  # no step can be made of it
        raise DataError(
            f"every image of a batch is unreadable ({', '.join(u.path for u in left_out)}): delete or "
            "replace them"
        )
    images, labels = default_collate(kept)
    return images, labels, left_out


def eval_size(size: int, crop_ratio: float) -> int:
    """The short side an image is resized to before the centre crop of ``size`` (224 / 0.875 = 256)."""
    return round(size / crop_ratio)


def policy(name: AutoAugment) -> list[v2.Transform]:
    """torchvision's automatic augmentation policy ``name``, on uint8 images; [] for none."""
    policies = {"trivialaugment": v2.TrivialAugmentWide, "randaugment": v2.RandAugment}
    policies["autoaugment"] = v2.AutoAugment
    return [] if name == "none" else [policies[name]()]


def augmentation(
    size: int, scale: tuple[float, float], flip: bool, auto_augment: AutoAugment
) -> list[Callable]:
    """A photo's training augmentation, uint8 image to uint8 crop: random-resized crop, flip, policy."""
    steps = [v2.RandomResizedCrop(size, scale=scale, antialias=True)]
    steps += [v2.RandomHorizontalFlip()] if flip else []
    return [*steps, *policy(auto_augment)]


def eval_transform(size: int, crop_ratio: float) -> Callable:
    """uint8 image to the uint8 evaluation crop: short side to ``size / crop_ratio``, centre crop."""
    return v2.Compose([v2.Resize(eval_size(size, crop_ratio), antialias=True), v2.CenterCrop(size)])


def centre_crops(size: int, mean: Tensor, std: Tensor) -> BatchTransform:
    """The resident evaluation batches: each decoded square's centre ``size`` square, normalized."""

    def transform(images: Tensor, batch: Tensor, generator: torch.Generator) -> Tensor:
        top, left = (round((side - size) / 2) for side in images.shape[-2:])  # as v2's CenterCrop
        crops = images[batch, :, top : top + size, left : left + size]  # copies only those
        return normalize(crops, mean, std)

    return transform
