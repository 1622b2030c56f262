"""``python -m benchmarks.step_overhead``: what the loop around a training step costs, per step.

A one-layer network at batch 8 on resident Fashion-MNIST: a few tens of microseconds of arithmetic,
so the rest is the loop. Each row runs in a process of its own (one torch thread, the CLI's allocator
setting), timed over the steps after the first ``--warmup`` (start-up and the first steps excluded):

- bare: a hand-written PyTorch loop;
- lightning: Lightning's Trainer, logger, progress bar, checkpointing and summary off;
- lightning with its own defaults: the same module logging its loss each step (``self.log``), in
  Lightning's Trainer as it comes (its default logger, ModelCheckpoint, ModelSummary) with its TQDM
  bar (its default where Rich is not installed; with Rich it picks its Rich bar);
- lightning, our model and data: the same Trainer fitting ``ImageClassifier`` on
  ``FashionMNISTDataModule`` (the template's recipe and loader, no ``app/``);
- template, features off: ``app.cli.main(["fit", ...])`` with the logger, progress bar, summary,
  checkpoints and listed callbacks turned off by flags (what ``app/`` itself costs);
- template: ``app.cli.main(["fit", ...])`` as users run it (default callbacks; W&B offline);
- template, Lightning's profiler: the same with ``--trainer.profiler=null`` (Lightning's default
  pass-through profiler instead of ``app.profiler.NoProfiler``): what that setting saves.

A round starts every row's process at once; the rows then take turns of ``--chunk`` steps while the
others wait (:class:`Turns`), so that all rows meet the same machine, and each row's figure is its
mean over its turns. The medians of ``--rounds`` rounds, each round's figures beside them. A process
per row: in one process, a row's figure depended on the template rows run before it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from lightning import Callback
from torch import nn
from torch.nn import functional as F

from benchmarks.common import count

ROOT = Path(__file__).resolve().parents[1]
TURNS = "STEP_OVERHEAD_TURNS"  # warmup, chunk and the two pipes of a row's process


class OneLayer(nn.Module):
    """The trivial network: a linear layer over the flattened image."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28) -> None:
        super().__init__()
        self.linear = nn.Linear(in_channels * image_size**2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1))


def batches(root: str, batch_size: int, steps: int):
    """``steps`` normalized batches of the template's Fashion-MNIST training split, drawn from memory."""
    from data import FashionMNISTDataModule
    from data.batch_transforms import normalize

    dm = FashionMNISTDataModule(root=root)
    dm.prepare_data()
    dm.setup("fit")
    indices = torch.as_tensor(dm.train_set.indices)
    images = dm.train_set.dataset.data[indices].unsqueeze(1).contiguous()
    labels = torch.as_tensor(dm.train_set.dataset.targets)[indices]
    mean, std = torch.tensor(dm.mean), torch.tensor(dm.std)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    for step in range(steps):
        batch = order[step * batch_size % len(order) :][:batch_size]
        yield normalize(images[batch], mean, std), labels[batch]


class Turns:
    """The rows' processes take turns: each runs ``chunk`` steps while the others wait.

    At each ``chunk``-th step from ``warmup`` on, a row tells the coordinator how long its last chunk took
    (µs per step; ``ready`` the first time) and waits for its next turn. Rows interleaved a chunk at a time
    meet the same machine: on a VM whose speed drifts by tens of percent within minutes, the ratio of two
    rows then moves by a few percent. The wait is not timed.
    """

    def __init__(self) -> None:
        self.warmup, self.chunk, read, write = map(int, os.environ[TURNS].split(","))
        self.go, self.tell = os.fdopen(read, "rb", buffering=0), os.fdopen(write, "w", buffering=1)
        self.start: float | None = None

    def at(self, step: int) -> None:
        """Called as each training step starts."""
        if step < self.warmup or (step - self.warmup) % self.chunk:
            return
        now = time.perf_counter()
        self.tell.write("ready\n" if self.start is None else f"{(now - self.start) / self.chunk * 1e6}\n")
        self.go.read(1)
        self.start = time.perf_counter()


class StepClock(Callback):
    """Lightning's rows' side of :class:`Turns`."""

    def __init__(self) -> None:
        self.turns = Turns()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.turns.at(trainer.global_step)


def bare(args: argparse.Namespace, resident: list) -> None:
    net, turns = OneLayer(), Turns()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-3)
    for step, (x, y) in enumerate(resident):
        turns.at(step)
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def lightning(args: argparse.Namespace, resident: list, defaults: bool = False) -> None:
    from lightning import LightningModule

    class Module(LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = OneLayer()

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.cross_entropy(self.net(x), y)
            if defaults:
                self.log("train/loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-3)

    # A list would be read as several loaders: a plain iterable of the same batches.
    lightning_fit(args, len(resident), Module(), defaults, train_dataloaders=Iterable(resident))


def lightning_defaults(args: argparse.Namespace, resident: list) -> None:
    lightning(args, resident, defaults=True)


def lightning_ours(args: argparse.Namespace, resident: list) -> None:
    from functools import partial

    from data import FashionMNISTDataModule
    from models import ImageClassifier
    from models.schedules import WarmupCosineLR

    model = ImageClassifier(  # configs/defaults.yaml's recipe
        OneLayer(),
        optimizer=partial(torch.optim.SGD, lr=0.01, momentum=0.9, weight_decay=5e-3),
        scheduler=partial(WarmupCosineLR, warmup_ratio=0.0, final_lr_ratio=0.1),
    )
    data = FashionMNISTDataModule(root=args.root, batch_size=args.batch_size)
    lightning_fit(args, len(resident), model, datamodule=data)


def lightning_fit(args: argparse.Namespace, steps: int, model, defaults: bool = False, **data) -> None:
    from lightning import Trainer
    from lightning.pytorch.callbacks import TQDMProgressBar

    off = {"logger": False, "enable_progress_bar": False, "enable_checkpointing": False}
    off["enable_model_summary"] = False
    clock = [StepClock(), *([TQDMProgressBar()] if defaults else [])]
    with tempfile.TemporaryDirectory() as folder:  # where the defaults' logger and checkpoints write
        trainer = Trainer(
            **({} if defaults else off),
            default_root_dir=folder,
            max_steps=steps,
            accelerator="cpu",
            devices=1,
            callbacks=clock,
        )
        trainer.fit(model, **data)


class Iterable:
    """The batches, as one loader."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def template(args: argparse.Namespace, resident: list, *flags: str) -> None:
    from app.cli import main

    with tempfile.TemporaryDirectory() as folder:
        main(
            [
                "fit",
                f"--config={ROOT / 'configs' / 'fashion_mnist.yaml'}",
                f"--data.root={args.root}",
                "--model.net=benchmarks.step_overhead.OneLayer",
                f"--data.batch_size={args.batch_size}",
                f"--trainer.max_steps={len(resident)}",
                "--test_after_fit=false",
                f"--trainer.default_root_dir={folder}",
                f"--trainer.callbacks+={CLOCK}",
                *flags,
            ]
        )


def template_off(args: argparse.Namespace, resident: list) -> None:
    off = ["logger", "enable_progress_bar", "enable_model_summary", "enable_checkpointing"]
    template(args, resident, f"--trainer.callbacks=[{CLOCK}]", *(f"--trainer.{flag}=false" for flag in off))


def template_lightning_profiler(args: argparse.Namespace, resident: list) -> None:
    template(args, resident, "--trainer.profiler=null")


CLOCK = json.dumps({"class_path": "benchmarks.step_overhead.StepClock"})
ROWS = {
    "bare": bare,
    "lightning": lightning,
    "lightning with its own defaults": lightning_defaults,
    "lightning, our model and data": lightning_ours,
    "template, features off": template_off,
    "template": template,
    "template, Lightning's profiler": template_lightning_profiler,
}
PAIRS = [("template", "lightning with its own defaults"), ("template", "template, Lightning's profiler")]


def run_row(args: argparse.Namespace) -> None:
    """This process runs one row, its steps timed by :class:`Turns`."""
    from app.process import keep_freed_memory

    keep_freed_memory()  # the CLI's allocator setting, for every row
    torch.set_num_threads(1)
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    steps = args.warmup + args.chunk * args.chunks + 1  # the last turn ends where a next step starts
    ROWS[args.row](args, list(batches(args.root, args.batch_size, steps)))


def interleaved(args: argparse.Namespace) -> dict[str, float]:
    """One round: every row in a process of its own, taking turns a chunk at a time; µs per step of each."""
    processes, go, told, logs = {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as folder:
        for row in ROWS:
            (to_row, go[row]), (told_fd, from_row) = os.pipe(), os.pipe()
            env = {**os.environ, TURNS: f"{args.warmup},{args.chunk},{to_row},{from_row}"}
            command = [sys.executable, "-m", "benchmarks.step_overhead", *sys.argv[1:], "--row", row]
            # Its output to a file: a pipe nobody reads while the rows take turns would fill and block it.
            logs[row] = Path(folder) / f"{len(logs)}.log"
            with open(logs[row], "w") as log:
                fds, out = (to_row, from_row), {"stdout": log, "stderr": log}
                processes[row] = subprocess.Popen(command, cwd=ROOT, env=env, pass_fds=fds, **out)
            os.close(to_row)
            os.close(from_row)
            told[row] = os.fdopen(told_fd)

        def told_by(row: str) -> str:
            """The row's next line; if its process ended without one, its log's end, and exit."""
            if line := told[row].readline():
                return line.strip()
            sys.exit(f"row {row!r} failed:\n{logs[row].read_text()[-3000:]}")

        chunks: dict[str, list[float]] = {row: [] for row in ROWS}
        try:
            for row in ROWS:
                told_by(row)  # ready
            for turn in range(args.chunks):
                for row in ROWS if turn % 2 else reversed(ROWS):
                    os.write(go[row], b"1")
                    chunks[row].append(float(told_by(row)))
            for row in ROWS:
                os.write(go[row], b"1")  # the rows end only once all are timed
            for row, process in processes.items():
                if process.wait():
                    told_by(row)
        finally:
            for process in processes.values():
                process.kill()
    return {row: statistics.fmean(values) for row, values in chunks.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(ROOT / "datasets"), help="data folder (Fashion-MNIST)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=100, help="first steps, not timed")
    parser.add_argument("--chunk", type=int, default=100, help="steps a row runs in one turn")
    # Within one epoch (6,875 steps at batch 8): no validation among them.
    parser.add_argument("--chunks", type=int, default=29, help="turns each row takes")
    parser.add_argument("--rounds", type=count, default=3)
    parser.add_argument("--row", choices=ROWS, help=argparse.SUPPRESS)  # one row, in this process
    args = parser.parse_args()
    if args.row:
        return run_row(args)
    rows: dict[str, list[float]] = {row: [] for row in ROWS}
    for _ in range(args.rounds):
        for row, value in interleaved(args).items():
            rows[row].append(value)
    per_step = {row: statistics.median(values) for row, values in rows.items()}
    turns = f"{args.chunk} steps, {args.chunks} turns each after {args.warmup} untimed steps"
    print(f"torch {torch.__version__}, 1 thread, batch {args.batch_size}; a process per row, ", end="")
    print(f"the rows taking turns of {turns}; median of {args.rounds} rounds\n")
    print("| row | µs per step | over bare | over lightning | / lightning | each round |")
    print("|---|---|---|---|---|---|")
    for row, value in per_step.items():
        rounds = ", ".join(f"{v:.0f}" for v in rows[row])
        over_bare, over_lightning = value - per_step["bare"], value - per_step["lightning"]
        ratio = value / per_step["lightning"]
        print(f"| {row} | {value:.0f} | {over_bare:+.0f} | {over_lightning:+.0f} | {ratio:.2f} | {rounds} |")
    print()
    for row, base in PAIRS:
        ratios = [a / b for a, b in zip(rows[row], rows[base], strict=True)]
        each = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"{row} / {base}, each round: {each}; median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
