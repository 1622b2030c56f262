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

Steps are timed by one callback (:class:`StepClock`). A round runs the rows in turn; the medians of
``--rounds`` rounds, each round's figures beside them. A process per row: in one process, a row's
figure depended on the template rows run before it (what they leave running stays).
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

ROOT = Path(__file__).resolve().parents[1]
MEASURED: list[float] = []  # µs per step, as StepClock measured it


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


class StepClock(Callback):
    """Times the training steps after the first ``warmup``; appends µs per step to ``MEASURED`` at the end.

    Args:
        warmup: steps not timed.
    """

    def __init__(self, warmup: int = 100) -> None:
        self.warmup, self.start, self.end = warmup, 0.0, 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.warmup:
            self.start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.end = time.perf_counter()

    def on_train_end(self, trainer, pl_module) -> None:
        MEASURED.append((self.end - self.start) / (trainer.global_step - self.warmup) * 1e6)


def bare(args: argparse.Namespace, resident: list) -> float:
    net = OneLayer()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-3)
    for step, (x, y) in enumerate(resident):
        if step == args.warmup:
            start = time.perf_counter()
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return (time.perf_counter() - start) / (len(resident) - args.warmup) * 1e6


def lightning(args: argparse.Namespace, resident: list, defaults: bool = False) -> float:
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
    return lightning_fit(args, len(resident), Module(), defaults, train_dataloaders=Iterable(resident))


def lightning_defaults(args: argparse.Namespace, resident: list) -> float:
    return lightning(args, resident, defaults=True)


def lightning_ours(args: argparse.Namespace, resident: list) -> float:
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
    return lightning_fit(args, len(resident), model, datamodule=data)


def lightning_fit(args: argparse.Namespace, steps: int, model, defaults: bool = False, **data) -> float:
    from lightning import Trainer
    from lightning.pytorch.callbacks import TQDMProgressBar

    off = {"logger": False, "enable_progress_bar": False, "enable_checkpointing": False}
    off["enable_model_summary"] = False
    clock = [StepClock(args.warmup), *([TQDMProgressBar()] if defaults else [])]
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
    return MEASURED.pop()


class Iterable:
    """The batches, as one loader."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def clock(args: argparse.Namespace) -> str:
    """:class:`StepClock` as a config gives it."""
    config = {"class_path": "benchmarks.step_overhead.StepClock", "init_args": {"warmup": args.warmup}}
    return json.dumps(config)


def template(args: argparse.Namespace, resident: list, *flags: str) -> float:
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
                f"--trainer.callbacks+={clock(args)}",
                *flags,
            ]
        )
    # The class the config names is this module's imported copy (not __main__'s): its list.
    from benchmarks.step_overhead import MEASURED as measured

    return measured.pop()


def template_off(args: argparse.Namespace, resident: list) -> float:
    off = ["logger", "enable_progress_bar", "enable_model_summary", "enable_checkpointing"]
    only_clock = f"--trainer.callbacks=[{clock(args)}]"
    return template(args, resident, only_clock, *(f"--trainer.{flag}=false" for flag in off))


def template_lightning_profiler(args: argparse.Namespace, resident: list) -> float:
    return template(args, resident, "--trainer.profiler=null")


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
    """This process times one row; its µs per step is its last line."""
    from app.process import keep_freed_memory

    keep_freed_memory()  # the CLI's allocator setting, for every row
    torch.set_num_threads(1)
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    resident = list(batches(args.root, args.batch_size, args.steps))
    print(f"{ROWS[args.row](args, resident):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(ROOT / "datasets"), help="data folder (Fashion-MNIST)")
    parser.add_argument("--batch-size", type=int, default=8)
    # Within one epoch (6,875 steps at batch 8): no validation among them.
    parser.add_argument("--steps", type=int, default=3000, help="steps a row runs, warm-up included")
    parser.add_argument("--warmup", type=int, default=100, help="first steps, not timed")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--row", choices=ROWS, help=argparse.SUPPRESS)  # one row, in this process
    args = parser.parse_args()
    if args.row:
        return run_row(args)
    rows: dict[str, list[float]] = {row: [] for row in ROWS}
    for _ in range(args.rounds):
        for row in ROWS:
            command = [sys.executable, "-m", "benchmarks.step_overhead", *sys.argv[1:], "--row", row]
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"row {row!r} failed:\n{done.stderr[-3000:]}")
            rows[row].append(float(done.stdout.split()[-1]))
    per_step = {row: statistics.median(values) for row, values in rows.items()}
    print(f"torch {torch.__version__}, 1 thread, batch {args.batch_size}, {args.steps} steps (first ", end="")
    print(f"{args.warmup} untimed), a process per row, median of {args.rounds} interleaved rounds\n")
    print("| row | µs per step | over bare | over lightning | / lightning | each round |")
    print("|---|---|---|---|---|---|")
    for row, value in per_step.items():
        rounds = ", ".join(f"{v:.0f}" for v in rows[row])
        over_bare, over_lightning = value - per_step["bare"], value - per_step["lightning"]
        ratio = value / per_step["lightning"]
        print(f"| {row} | {value:.0f} | {over_bare:+.0f} | {over_lightning:+.0f} | {ratio:.2f} | {rounds} |")
    print()
    # Rows of one round ran minutes apart at most: their ratio moves less than either row's figure.
    for row, base in PAIRS:
        ratios = [a / b for a, b in zip(rows[row], rows[base], strict=True)]
        each = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"{row} / {base}, each round: {each}; median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
