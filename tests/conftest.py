"""Shared fixtures: data sets written in their real on-disk formats, and one way to run the CLI.

Every CLI run in the tests goes through :func:`run_app`, which shrinks it (one epoch, few batches,
no workers, no progress bar), so a test states only what it is about.
"""

import csv
import json
import os
import pickle
import socket
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
SHRINK = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=4",
    "--trainer.log_every_n_steps=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
    "--data.num_workers=0",
    "--data.val_size=0.2",
    "--trainer.logger=CSVLogger",
]


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
    for split, seed in (("train", 3), ("test", 4)):
        images, labels = learnable_images(classes * per_class, size, 3, classes, seed)
        for i, (image, label) in enumerate(zip(images, labels, strict=True)):
            path = root / split / f"class_{label}" / f"{i}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(path)
    return root


@pytest.fixture(scope="session")
def mnist_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mnist(tmp_path_factory.mktemp("mnist"))


@pytest.fixture(scope="session")
def fashion_mnist_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mnist(tmp_path_factory.mktemp("fashion"), folder="FashionMNIST")


@pytest.fixture(scope="session")
def cifar10_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cifar(tmp_path_factory.mktemp("cifar10"))


@pytest.fixture(scope="session")
def cifar100_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cifar(tmp_path_factory.mktemp("cifar100"), classes=100)


@pytest.fixture(scope="session")
def image_folder_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("images"))


def app_command(
    subcommand: str,
    *args: str,
    configs: tuple[str, ...] = (),
    shrink: bool = True,
    launcher: tuple[str, ...] = (),
) -> list[str]:
    """``[LAUNCHER] python -m app SUBCOMMAND --config C.. [SHRINK] ARGS``; LAUNCHER e.g. torchrun's."""
    command = [sys.executable, *launcher, "-m", "app", subcommand, *(f"--config={ROOT / c}" for c in configs)]
    return [*command, *(SHRINK if shrink else []), *args]


def app_env() -> dict[str, str]:
    """The environment of a CLI run: the project and ``tests/`` (for test callbacks) importable."""
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}", "PYTHONWARNINGS": "ignore"}


def run_app(
    subcommand: str, *args: str, cwd: Path, timeout: int = 300, **options
) -> subprocess.CompletedProcess:
    """Run :func:`app_command` in ``cwd``, where its ``runs/`` land."""
    command = app_command(subcommand, *args, **options)
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(command, cwd=cwd, env=app_env(), capture_output=True, text=True, timeout=timeout)


def run_folder(cwd: Path, version: int = 0) -> Path:
    """The folder ``runs/NAME/version_N`` of the one run name used under ``cwd``."""
    (found,) = (cwd / "runs").glob(f"*/version_{version}")
    return found


def logged(run: Path) -> dict[str, list[float]]:
    """Every metric a run's CSVLogger wrote, in order."""
    values: dict[str, list[float]] = {}
    with open(run / "metrics.csv") as f:
        for row in csv.DictReader(f):
            for key, value in row.items():
                if value and key not in ("epoch", "step"):
                    values.setdefault(key, []).append(float(value))
    return values


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def max_difference(a: dict, b: dict) -> float:
    """Largest absolute difference between two state dicts with the same keys."""
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


def probe(folder) -> str:
    """The CLI flag that adds a :class:`weights_probe.WeightsProbe` writing to ``folder``."""
    callback = {"class_path": "weights_probe.WeightsProbe", "init_args": {"folder": str(folder)}}
    return f"--trainer.callbacks+={json.dumps(callback)}"


def load_probe(folder: Path, moment: str, rank: int) -> dict:
    """What the probe saved for ``rank`` at ``moment`` (start or end)."""
    return torch.load(folder / f"{moment}-rank{rank}.pt", weights_only=True)


def check(result) -> None:
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture
def fashion_mnist() -> Path:
    """Debian's real Fashion-MNIST; skipped where missing, except in CI, which installs it."""
    if not FASHION_MNIST.is_dir() and not os.environ.get("CI"):
        pytest.skip(f"{FASHION_MNIST} missing: apt install dataset-fashion-mnist")
    return FASHION_MNIST
