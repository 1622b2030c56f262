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


def now(device: torch.device) -> float:
    """Seconds, once the device has finished its queued work."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def report(seconds: list[float], samples_per_epoch: int, test_acc: float) -> None:
    """The one JSON line the benchmark driver reads."""
    samples = [samples_per_epoch] * len(seconds)
    print(json.dumps({"train_seconds": seconds, "train_samples": samples, "test_acc": test_acc}))


def seconds(command: list[str], folder: Path, **env: str) -> float:
    """Wall time of one child process run in ``folder`` with W&B offline and ``env`` set; it must succeed."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONPATH": str(root), **env}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"error: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start
