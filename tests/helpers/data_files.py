"""Data sets written in their real on-disk formats, with labels a small network can learn."""

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image


def learnable_images(
    n: int, size: int, channels: int, classes: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images (n, size, size, channels) whose label is where a bright square sits."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % classes
    rng.shuffle(labels)
    images = rng.integers(0, 60, (n, size, size, channels), dtype=np.uint8)
    side = size // 4
    for image, label in zip(images, labels, strict=True):
        row, col = divmod(int(label) % 16, 4)
        image[row * side : (row + 1) * side, col * side : (col + 1) * side] = 255
    return images, labels.astype(np.uint8)


def write_idx(path: Path, array: np.ndarray) -> None:
    """The IDX format of MNIST: magic (0, 0, uint8 code 8, ndim), big-endian dims, bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = struct.pack(">BBBB", 0, 0, 8, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def write_mnist(root: Path, folder: str = "MNIST", n_train: int = 640, n_test: int = 251) -> Path:
    for prefix, n, seed in (("train", n_train, 0), ("t10k", n_test, 1)):
        images, labels = learnable_images(n, 28, 1, 10, seed)
        write_idx(root / folder / "raw" / f"{prefix}-images-idx3-ubyte", images[..., 0])
        write_idx(root / folder / "raw" / f"{prefix}-labels-idx1-ubyte", labels)
    return root


def write_imbalanced_mnist(root: Path, per_class: list[int], n_test: int = 100) -> Path:
    """MNIST's files with ``per_class[k]`` training images of class k (their order mixed)."""
    images, labels = learnable_images(10 * max(per_class), 28, 1, 10, seed=6)
    keep = np.sort(np.concatenate([np.flatnonzero(labels == k)[:n] for k, n in enumerate(per_class)]))
    write_idx(root / "MNIST" / "raw" / "train-images-idx3-ubyte", images[keep, ..., 0])
    write_idx(root / "MNIST" / "raw" / "train-labels-idx1-ubyte", labels[keep])
    images, labels = learnable_images(n_test, 28, 1, 10, seed=1)
    write_idx(root / "MNIST" / "raw" / "t10k-images-idx3-ubyte", images[..., 0])
    write_idx(root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte", labels)
    return root


def write_cifar(root: Path, classes: int = 10, n_train: int = 500, n_test: int = 200) -> Path:
    """CIFAR's python pickles: rows of 3072 bytes (R, G, B planes) and a list of labels."""
    cifar10 = classes == 10
    folder = root / ("cifar-10-batches-py" if cifar10 else "cifar-100-python")
    folder.mkdir(parents=True)
    label_key = "labels" if cifar10 else "fine_labels"
    train_files = [f"data_batch_{i}" for i in range(1, 6)] if cifar10 else ["train"]
    images, labels = learnable_images(n_train + n_test, 32, 3, classes, seed=2)
    rows = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    parts = [*np.array_split(np.arange(n_train), len(train_files)), np.arange(n_train, n_train + n_test)]
    for name, idx in zip([*train_files, "test_batch" if cifar10 else "test"], parts, strict=True):
        batch = {"data": rows[idx], label_key: labels[idx].tolist()}
        (folder / name).write_bytes(pickle.dumps(batch))
    names = [f"class{i}" for i in range(classes)]
    meta = {"label_names": names} if cifar10 else {"fine_label_names": names}
    (folder / ("batches.meta" if cifar10 else "meta")).write_bytes(pickle.dumps(meta))
    return root


def write_image_folder(root: Path, classes: int = 3, per_class: int = 12, size: int = 20) -> Path:
    for split in ("train", "test"):
        write_split(root, split, [per_class] * classes, size)
    return root


SPLIT_SEEDS = {"train": 3, "test": 4, "val": 5}


def write_split(root: Path, split: str, per_class: list[int], size: int = 20, suffix: str = "png") -> Path:
    """``ROOT/SPLIT/class_k/*.SUFFIX`` (png or jpg): ``per_class[k]`` learnable images of class k."""
    needs_image_folders()
    classes = len(per_class)
    images, labels = learnable_images(classes * max(per_class), size, 3, classes, SPLIT_SEEDS[split])
    for label, count in enumerate(per_class):
        for i in np.flatnonzero(labels == label)[:count]:
            path = root / split / f"class_{label}" / f"{i}.{suffix}"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(images[i]).save(path, **({"quality": 95} if suffix == "jpg" else {}))
    return root


# Photo sizes (width, height) and modes of write_photo_folder: wide, tall, square, smaller than the
# crops the tests take; grey and RGB JPEGs, RGBA and palette PNGs.
PHOTO_SIZES = [(48, 32), (32, 48), (40, 40), (64, 24), (20, 30)]
PHOTO_MODES = [("RGB", "jpg"), ("L", "jpg"), ("RGBA", "png"), ("P", "png"), ("P", "gif")]


def write_photo_folder(root: Path, classes: int = 3, per_class: int = 10, seed: int = 5) -> Path:
    """``ROOT/{train,test}/class_k/`` photos of mixed sizes and modes, and a text file among them.

    Class k is brighter the higher k and tinted in colour k % 3, all over the image: any crop of it,
    grey or in colour, tells the class.
    """
    needs_image_folders()
    rng = np.random.default_rng(seed)
    for split in ("train", "test"):
        for i in range(classes * per_class):
            label = i % classes
            (width, height), (mode, ext) = PHOTO_SIZES[i % 5], PHOTO_MODES[(i // 5) % 5]
            pixels = rng.integers(0, 50, (height, width, 3)) + 50 * label
            pixels[..., label % 3] += 60
            image = Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).convert(mode)
            path = root / split / f"class_{label}" / f"{i:03d}.{ext}"
            path.parent.mkdir(parents=True, exist_ok=True)
            image.save(path, quality=90) if ext == "jpg" else image.save(path)
    (root / "train" / "class_0" / "notes.txt").write_text("not an image")
    return root


def corrupt_jpeg(path: Path) -> Path:
    """A JPEG cut off halfway, as a failed copy leaves one."""
    Image.fromarray(np.full((40, 40, 3), 128, np.uint8)).save(path, quality=90)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


def read_idx_gz(path: Path) -> np.ndarray:
    """A gzipped IDX file (Debian's Fashion-MNIST) as a uint8 array."""
    data = gzip.decompress(path.read_bytes())
    ndim = data[3]
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def write_fashion_folder(
    root: Path, source: Path, classes: list[int], train: int, test: int, seed: int = 0
) -> Path:
    """``ROOT/{train,test}/<class name>/*.jpg``: ``train`` and ``test`` images per class of Fashion-MNIST
    (``source`` holds its gzipped IDX files), drawn at random from its training split, as RGB JPEGs."""
    images = read_idx_gz(source / "train-images-idx3-ubyte.gz")
    labels = read_idx_gz(source / "train-labels-idx1-ubyte.gz")
    rng = np.random.default_rng(seed)
    for label in classes:
        chosen = rng.choice(np.flatnonzero(labels == label), train + test, replace=False)
        for i, index in enumerate(chosen):
            split = "train" if i < train else "test"
            path = root / split / FASHION_CLASSES[label] / f"{index}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(images[index]).convert("RGB").save(path, quality=95)
    return root


FASHION_CLASSES = [
    "tshirt",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "boot",
]


def needs_image_folders() -> None:
    """Skip the calling test where the optional image-folder part (``data/image_folder/``) was dropped:
    the folders these writers make are its input."""
    pytest.importorskip("data.image_folder", reason="the image-folder part was dropped")
