"""``python -m benchmarks.recipes``: recipes from the command line, side by side on real Fashion-MNIST.

Two tables (Markdown, stdout), each row one ``python -m app fit`` child process at the same epochs:

- accuracy: the default SGD + cosine, AdamW + warmup/cosine, + EMA, + mixup/CutMix;
- imbalance: classes 0-4 cut to 5 % of their training images (the test split untouched), plain,
  ``--data.sampler balanced`` and ``--model.class_weights balanced``: test accuracy and macro F1.

The exact flags of each row are printed under its table.
"""

import argparse
import csv
import gzip
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_COPY = Path("/usr/share/datasets/fashion-mnist")
ADAMW = ["--model.optimizer=AdamW", "--model.optimizer.lr=0.002", "--model.optimizer.weight_decay=0.05"]
ADAMW += ["--model.scheduler.warmup_ratio=0.05", "--model.scheduler.final_lr_ratio=0.0"]
ADAMW += ["--model.label_smoothing=0.1"]
EMA = [f"--config={ROOT / 'configs' / 'ema.yaml'}"]
MIX = ["--model.mixup_alpha=0.2", "--model.cutmix_alpha=1.0"]

RECIPES = {
    "SGD + cosine (default)": [],
    "AdamW + warmup/cosine + smoothing": ADAMW,
    "AdamW ... + EMA": [*ADAMW, *EMA],
    "AdamW ... + EMA + mixup/CutMix": [*ADAMW, *EMA, *MIX],
}
if not (ROOT / "configs" / "ema.yaml").exists():  # the optional EMA part was dropped
    RECIPES = {name: args for name, args in RECIPES.items() if "EMA" not in name}
IMBALANCE = {
    "plain": [],
    "--data.sampler balanced": ["--data.sampler=balanced"],
    "--model.class_weights balanced": ["--model.class_weights=balanced"],
}


def write_imbalanced(folder: Path, keep: float, seed: int = 0) -> Path:
    """Fashion-MNIST in torchvision's raw layout, classes 0-4 of the training split cut to ``keep``."""
    raw = folder / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        with gzip.open(SYSTEM_COPY / f"{name}.gz") as src, open(raw / name, "wb") as dst:
            shutil.copyfileobj(src, dst)
    images, labels = (
        gzip.decompress((SYSTEM_COPY / f"train-{k}.gz").read_bytes())
        for k in ("images-idx3-ubyte", "labels-idx1-ubyte")
    )
    pixels = np.frombuffer(images, np.uint8, offset=16).reshape(-1, 784)
    targets = np.frombuffer(labels, np.uint8, offset=8)
    draw = np.random.default_rng(seed).random(len(targets))
    kept = (targets >= 5) | (draw < keep)
    n = int(kept.sum())
    (raw / "train-images-idx3-ubyte").write_bytes(
        np.array([2051, n, 28, 28], ">i4").tobytes() + pixels[kept].tobytes()
    )
    (raw / "train-labels-idx1-ubyte").write_bytes(
        np.array([2049, n], ">i4").tobytes() + targets[kept].tobytes()
    )
    return folder


def fit(flags: list[str], root: Path, epochs: int, folder: Path) -> dict[str, float]:
    """One ``fit`` child; the test metrics of its CSV log, and its wall time."""
    command = [sys.executable, "-m", "app", "fit", f"--config={ROOT / 'configs' / 'fashion_mnist.yaml'}"]
    command += [f"--data.root={root}", f"--trainer.max_epochs={epochs}", "--trainer.logger=CSVLogger"]
    command += ["--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={folder}", *flags]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    (metrics,) = folder.glob("*/version_*/metrics.csv")
    rows = list(csv.DictReader(metrics.read_text().splitlines()))
    test = {k: float(v) for row in rows for k, v in row.items() if k.startswith("test/") and v}
    return {**test, "seconds": time.perf_counter() - start}


def table(
    title: str, rows: dict[str, dict[str, float]], keys: list[str], flags: dict[str, list[str]]
) -> None:
    print(f"\n### {title}\n")
    print("| recipe | " + " | ".join(keys) + " | fit s |")
    print("|---" * (len(keys) + 2) + "|")
    for name, found in rows.items():
        values = " | ".join(f"{found.get(k, float('nan')):.4f}" for k in keys)
        print(f"| {name} | {values} | {found['seconds']:.0f} |")
    print()
    for name, extra in flags.items():
        print(f"- {name}: `{' '.join(extra) or '(defaults)'}`")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--keep", type=float, default=0.05, help="share of classes 0-4 kept in 'imbalance'")
    parser.add_argument("--only", choices=("accuracy", "imbalance"), default=None)
    args = parser.parse_args()
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.only != "imbalance":
            rows = {
                name: fit(flags, work / "data", args.epochs, work / f"a{i}")
                for i, (name, flags) in enumerate(RECIPES.items())
            }
            table(
                f"Fashion-MNIST, MnistCNN, {args.epochs} epochs", rows, ["test/acc", "test/f1_macro"], RECIPES
            )
        if args.only != "accuracy":
            root = write_imbalanced(work / "imbalanced", args.keep)
            rows = {
                name: fit(flags, root, args.epochs, work / f"b{i}")
                for i, (name, flags) in enumerate(IMBALANCE.items())
            }
            title = (
                f"Fashion-MNIST, classes 0-4 at {args.keep:.0%} of their train images, {args.epochs} epochs"
            )
            table(title, rows, ["test/acc", "test/f1_macro"], IMBALANCE)


if __name__ == "__main__":
    main()
