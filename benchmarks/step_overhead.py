"""``python -m benchmarks.step_overhead``: what the loop around a training step costs, per step.

A one-layer network at batch 8 on resident Fashion-MNIST: a few tens of microseconds of arithmetic,
so the rest is the loop. Three rows, each a whole process run at two step counts (the difference
cancels start-up, data loading and the end of the run), one torch thread, the template's allocator:

- bare: a hand-written PyTorch loop;
- lightning: Lightning's Trainer, logger, progress bar, checkpointing and summary off;
- template: ``python -m app fit`` as users run it (default callbacks; W&B offline).

Medians of ``--rounds`` interleaved rounds; a Markdown table goes to stdout.
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.common import seconds

ROOT = Path(__file__).resolve().parents[1]


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


def bare(args: argparse.Namespace) -> None:
    net = OneLayer()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-3)
    for x, y in list(batches(args.root, args.batch_size, args.steps)):  # made before, as for lightning
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def lightning(args: argparse.Namespace) -> None:
    from lightning import LightningModule, Trainer

    class Module(LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = OneLayer()

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-3)

    off = {"logger": False, "enable_progress_bar": False, "enable_checkpointing": False}
    trainer = Trainer(**off, enable_model_summary=False, max_steps=args.steps, accelerator="cpu", devices=1)
    # A list would be read as several loaders: a plain iterable of the same batches.
    resident = list(batches(args.root, args.batch_size, args.steps))
    trainer.fit(Module(), train_dataloaders=Iterable(resident))


class Iterable:
    """The batches, as one loader."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def template_command(args: argparse.Namespace, steps: int, folder: Path) -> list[str]:
    command = [sys.executable, "-m", "app", "fit", f"--config={ROOT / 'configs' / 'fashion_mnist.yaml'}"]
    command += [f"--data.root={args.root}", "--model.net=benchmarks.step_overhead.OneLayer"]
    command += [f"--data.batch_size={args.batch_size}", f"--trainer.max_steps={steps}"]
    return [*command, "--test_after_fit=false", f"--trainer.default_root_dir={folder}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(ROOT / "datasets"), help="data folder (Fashion-MNIST)")
    parser.add_argument("--batch-size", type=int, default=8)
    # The longer, the less the start-up's spread (~0.5 s here) weighs; an epoch (a validation) is 6,875.
    parser.add_argument("--steps", type=int, nargs=2, default=[300, 6300], help="the two step counts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--row", choices=("bare", "lightning"), help=argparse.SUPPRESS)  # a child's part
    args = parser.parse_args()
    if args.row:
        from benchmarks.common import arguments

        arguments("")  # the template's allocator setting
        torch.set_num_threads(1)
        args.steps = args.steps[0]
        (bare if args.row == "bare" else lightning)(args)
        return
    short, long = args.steps
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows: dict[str, list[float]] = {"bare": [], "lightning": [], "template": []}
        for _ in range(args.rounds):
            for row in rows:
                times = []
                for steps in (short, long):
                    if row == "template":
                        command = template_command(args, steps, folder)
                    else:
                        command = [sys.executable, "-m", "benchmarks.step_overhead", f"--row={row}"]
                        command += [f"--root={args.root}", f"--batch-size={args.batch_size}"]
                        command += ["--steps", str(steps), "0"]
                    times.append(seconds(command, folder, OMP_NUM_THREADS="1"))
                rows[row].append((times[1] - times[0]) / (long - short) * 1e6)
    per_step = {row: statistics.median(values) for row, values in rows.items()}
    print(f"torch {torch.__version__}, 1 thread, batch {args.batch_size}, steps {short} and {long}, ", end="")
    print(f"median of {args.rounds} interleaved rounds\n")
    print("| row | us per step | over bare | over lightning |\n|---|---|---|---|")
    bare_cost, lightning_cost = per_step["bare"], per_step["lightning"]
    for row, value in per_step.items():
        print(f"| {row} | {value:.0f} | {value - bare_cost:+.0f} | {value - lightning_cost:+.0f} |")


if __name__ == "__main__":
    main()
