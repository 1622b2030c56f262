"""``python -m benchmarks.pictures``: what ``ValidationPictures`` adds to a whole fit.

Each row is a ``python -m app fit --config configs/fashion_mnist.yaml`` child process (real
Fashion-MNIST, W&B offline, no final test), timed from start to exit, with the default callbacks
and with the same list less ``ValidationPictures``. Medians of ``--rounds`` interleaved rounds;
a Markdown table goes to stdout.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import yaml

from benchmarks.common import seconds

ROOT = Path(__file__).resolve().parents[1]
PICTURES = "app.pictures.callback.ValidationPictures"


def without_pictures() -> str:
    """The flag that sets the default callbacks less ``ValidationPictures``."""
    callbacks = yaml.safe_load((ROOT / "configs" / "defaults.yaml").read_text())["trainer"]["callbacks"]
    kept = [c for c in callbacks if (c if isinstance(c, str) else c["class_path"]) != PICTURES]
    assert len(kept) == len(callbacks) - 1, "ValidationPictures is not among the default callbacks"
    return f"--trainer.callbacks={json.dumps(kept)}"


def command(root: str, epochs: int, pictures: bool, folder: Path) -> list[str]:
    fit = [sys.executable, "-m", "app", "fit", f"--config={ROOT / 'configs' / 'fashion_mnist.yaml'}"]
    fit += [f"--data.root={root}", f"--trainer.max_epochs={epochs}", "--test_after_fit=false"]
    fit += [f"--trainer.default_root_dir={folder}"]
    return fit if pictures else [*fit, without_pictures()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(ROOT / "datasets"), help="data folder (Fashion-MNIST)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[2, 6])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    times: dict[tuple[int, bool], list[float]] = {(e, p): [] for e in args.epochs for p in (False, True)}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for epochs, pictures in times:
                folder = Path(tmp) / f"{epochs}-{pictures}-{i}"
                folder.mkdir()
                fit = command(args.root, epochs, pictures, folder)
                times[epochs, pictures].append(seconds(fit, folder, WANDB_SILENT="true"))
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, median of {args.rounds} interleaved rounds\n")
    print("| epochs | fit s, without pictures | fit s, with pictures | ratio |\n|---|---|---|---|")
    for epochs in args.epochs:
        bare, drawn = (statistics.median(times[epochs, p]) for p in (False, True))
        print(f"| {epochs} | {bare:.1f} | {drawn:.1f} | {drawn / bare:.3f} |")
    print("\nEach round, s (without, with):")
    for epochs in args.epochs:
        pairs = zip(times[epochs, False], times[epochs, True], strict=True)
        print(f"- {epochs} epochs: " + ", ".join(f"{bare:.1f} / {drawn:.1f}" for bare, drawn in pairs))


if __name__ == "__main__":
    main()
