"""Image files as users have them (any size, mode and format), and what ``predict_image`` says of each."""

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import models

# (name, mode, width, height): grey, RGB, RGBA and palette PNGs, a JPEG, a GIF; larger and smaller than
# the networks' inputs, and not square.
KINDS = [
    ("grey.png", "L", 28, 28),
    ("wide.png", "RGB", 90, 40),
    ("alpha.png", "RGBA", 33, 61),
    ("palette.png", "P", 50, 50),
    ("photo.jpg", "RGB", 64, 48),
    ("small.gif", "P", 12, 20),
    ("sideways.jpg", "RGB", 64, 40),  # a phone's photo: stored on its side, EXIF saying to turn it
]
EXIF_ORIENTATION, TURNED_90 = 0x0112, 6


def write_image_files(folder: Path, seed: int = 0) -> list[Path]:
    """One file of each of ``KINDS`` in ``folder`` (a bright square on noise, somewhere); their paths."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, mode, width, height in KINDS:
        pixels = rng.integers(0, 80, (height, width, 3), dtype=np.uint8)
        top, left = rng.integers(0, height // 2), rng.integers(0, width // 2)
        pixels[top : top + height // 2, left : left + width // 2] = 255
        image = Image.fromarray(pixels).convert(mode)
        if name == "sideways.jpg":
            exif = Image.Exif()
            exif[EXIF_ORIENTATION] = TURNED_90
            image.save(folder / name, quality=90, exif=exif)
        else:
            image.save(folder / name, quality=90) if name.endswith(".jpg") else image.save(folder / name)
        paths.append(folder / name)
    return paths


def predict_image_answers(ckpt: Path, files: list[Path]) -> dict[str, tuple[str, float]]:
    """``models.load(ckpt).predict_image``'s first class and its probability for each file, by name."""
    model = models.load(ckpt, device="cpu")
    answers = {}
    for path in files:
        with Image.open(path) as image:
            answers[path.name] = model.predict_image(image, top=1)[0]
    return answers


def check_rows(rows: list[dict[str, str]], expected: dict[str, tuple[str, float]]) -> None:
    """predictions.csv's rows (by ``file``) say what ``expected`` says of each file."""
    assert sorted(row["file"] for row in rows) == sorted(expected)
    for row in rows:
        name, probability = expected[row["file"]]
        assert (row["class_name"], float(row["probability"])) == (name, pytest.approx(probability, abs=2e-6))


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that announces ``width`` x ``height`` grey pixels and holds a few rows of them: what a
    decompression bomb's header looks like, without its gigabytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = zlib.compress(b"\0" * (width + 1) * 4)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
