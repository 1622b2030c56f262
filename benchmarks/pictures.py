"""``python -m benchmarks.pictures``: what ``ValidationPictures`` adds to a whole fit.

Each row is a ``python -m app fit --config configs/fashion_mnist.yaml`` child process (real
Fashion-MNIST, W&B offline, no final test), timed from start to exit, with the default callbacks
and with the same list less ``ValidationPictures``. Medians of ``--rounds`` interleaved rounds;
a Markdown table goes to stdout; beside each wall time, the CPU seconds of the whole process.

``--beside-drawing``: in this process, what a drawing thread does to training steps on the same
cores: MnistCNN steps at batch 128 (torch's threads, one a core) timed alone, beside a thread drawing
validation pictures back to back, and beside one drawing them at the lowest priority, as
``ValidationPictures`` does (:func:`app.pictures.callback.yield_to_training`); rounds interleaved.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
import yaml

from benchmarks.common import count, seconds

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


def cpu_seconds() -> float:
    """User and system seconds of the child processes waited for so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def beside_drawing(steps: int, rounds: int) -> None:
    """Seconds of ``steps`` training steps alone and beside a drawing thread, each round's and the median."""
    import numpy as np

    from app.pictures.callback import yield_to_training
    from app.pictures.drawing import Sketch, draw
    from models import MnistCNN

    rng = np.random.default_rng(0)
    shown = (
        rng.standard_normal((32, 1, 28, 28)),
        rng.integers(0, 10, 32).tolist(),
        rng.integers(0, 10, 32).tolist(),
    )
    sketch = Sketch(rng.integers(0, 500, (10, 10)), 1, 1, [str(i) for i in range(10)], [0.29], [0.35], shown)
    net, x, y = MnistCNN(), torch.randn(128, 1, 28, 28), torch.randint(0, 10, (128,))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def train() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(net(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return time.perf_counter() - start

    def painter(stop: threading.Event, lowest: bool, folder: str) -> None:
        if lowest:
            yield_to_training()
        while not stop.is_set():
            draw(sketch, folder)

    train()  # warm-up
    rows = {"alone": [], "beside drawing": [], "beside drawing, lowest priority": []}
    with tempfile.TemporaryDirectory() as folder:
        for i in range(rounds):
            for row in list(rows) if i % 2 == 0 else list(rows)[::-1]:
                stop = threading.Event()
                thread = threading.Thread(target=painter, args=(stop, row.endswith("priority"), folder))
                if row != "alone":
                    thread.start()
                rows[row].append(train())
                stop.set()
                if row != "alone":
                    thread.join()
    alone = statistics.median(rows["alone"])
    threads, cores = torch.get_num_threads(), os.cpu_count()
    print(
        f"torch {torch.__version__}, {threads} threads, {cores} cores, {steps} steps of MnistCNN at ", end=""
    )
    print(f"batch 128, median of {rounds} interleaved rounds\n")
    print("| training steps | s (median) | / alone | each round |\n|---|---|---|---|")
    for row, values in rows.items():
        middle = statistics.median(values)
        print(f"| {row} | {middle:.2f} | {middle / alone:.2f} | {', '.join(f'{v:.2f}' for v in values)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(ROOT / "datasets"), help="data folder (Fashion-MNIST)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[2, 6])
    parser.add_argument("--rounds", type=count, default=3)
    parser.add_argument("--beside-drawing", type=int, metavar="STEPS", help="time STEPS steps beside drawing")
    args = parser.parse_args()
    if args.beside_drawing:
        return beside_drawing(args.beside_drawing, args.rounds)
    times: dict[tuple[int, bool], list[float]] = {(e, p): [] for e in args.epochs for p in (False, True)}
    cpu: dict[tuple[int, bool], list[float]] = {key: [] for key in times}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for epochs, pictures in times:
                folder = Path(tmp) / f"{epochs}-{pictures}-{i}"
                folder.mkdir()
                fit = command(args.root, epochs, pictures, folder)
                used = cpu_seconds()
                times[epochs, pictures].append(seconds(fit, folder, WANDB_SILENT="true"))
                cpu[epochs, pictures].append(cpu_seconds() - used)
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, median of {args.rounds} interleaved rounds\n")
    print("| epochs | fit s, without pictures | with | ratio | CPU s, without | with | ratio |")
    print("|---|---|---|---|---|---|---|")
    for epochs in args.epochs:
        bare, drawn = (statistics.median(times[epochs, p]) for p in (False, True))
        bare_cpu, drawn_cpu = (statistics.median(cpu[epochs, p]) for p in (False, True))
        walls = f"{bare:.1f} | {drawn:.1f} | {drawn / bare:.3f}"
        print(f"| {epochs} | {walls} | {bare_cpu:.1f} | {drawn_cpu:.1f} | {drawn_cpu / bare_cpu:.3f} |")
    print("\nEach round, s (without, with):")
    for epochs in args.epochs:
        pairs = zip(times[epochs, False], times[epochs, True], strict=True)
        print(f"- {epochs} epochs: " + ", ".join(f"{bare:.1f} / {drawn:.1f}" for bare, drawn in pairs))


if __name__ == "__main__":
    main()
