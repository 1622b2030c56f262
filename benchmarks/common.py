"""What the hand-written loops share: the template's process settings, arguments, a clock, the result line."""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from app.process import keep_freed_memory


def arguments(description: str) -> argparse.ArgumentParser:
    """The loops' flags; also gives the process the allocator setting the CLI gives the template's,
    so that a ratio compares loops, not allocators."""
    keep_freed_memory()
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--root", default="datasets")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return parser


def count(text: str) -> int:
    """An argparse type for a count of rounds: 1 or more."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give 1 or more")
    return value


def now(device: torch.device) -> float:
    """Seconds, once the device has finished its queued work."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


class EpochClock:
    """An epoch's training time on the device's own clock, read once at the epoch's end.

    On CUDA, an event at the start and one at each step's end (recorded, not waited for), so that
    the CPU keeps running ahead of the GPU as it does untimed; on CPU, ``perf_counter``. Both the
    template's timer and the hand-written loops use it: one measure for both sides.
    """

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.first, self.last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        if self.cuda:
            self.first.record()
        else:
            self.first = time.perf_counter()

    def step_done(self) -> None:
        if self.cuda:
            self.last.record()
        else:
            self.last = time.perf_counter()

    def seconds(self) -> float:
        """From ``start`` to the last ``step_done``: one wait for the device, here."""
        if not self.cuda:
            return self.last - self.first
        self.last.synchronize()
        return self.first.elapsed_time(self.last) / 1000


def report(seconds: list[float], samples_per_epoch: int, test_acc: float, **extra) -> None:
    """The one JSON line the benchmark driver reads (``extra``: more of its fields)."""
    samples = [samples_per_epoch] * len(seconds)
    print(json.dumps({"train_seconds": seconds, "train_samples": samples, "test_acc": test_acc, **extra}))


def seconds(command: list[str], folder: Path, **env: str) -> float:
    """Wall time of one child process run in ``folder`` with W&B offline and ``env`` set; it must succeed."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONPATH": str(root), **env}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"error: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start
