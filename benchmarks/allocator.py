"""``python -m benchmarks.allocator``: what the CLI's malloc setting (``app/allocator.py``) saves per step.

A training step of a shipped network (MnistCNN, batch 128, SGD; CIFAR-10's CifarCNN with ``--net cifar``) on
the CPU, in a child process each, with glibc's defaults and with the setting the CLI applies when it starts;
the same torch threads in both. Milliseconds per step after a warm-up, medians of ``--rounds`` interleaved
rounds, and their ratio; a Markdown table goes to stdout.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch
from torch.nn import functional as F

from benchmarks.common import count


def steps(net_name: str, batch: int, warmup: int, timed: int, tuned: bool) -> float:
    """Seconds per training step, in this process, after ``warmup`` steps."""
    from models import CifarCNN, MnistCNN

    if tuned:
        from app.process import keep_freed_memory

        keep_freed_memory()
    net, shape = (MnistCNN(), (1, 28, 28)) if net_name == "mnist" else (CifarCNN(), (3, 32, 32))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, *shape), torch.randint(0, 10, (batch,))
    for step in range(warmup + timed):
        if step == warmup:
            start = time.perf_counter()
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return (time.perf_counter() - start) / timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", choices=("mnist", "cifar"), default="mnist")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=count, default=5)
    parser.add_argument("--child", choices=("defaults", "tuned"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(steps(args.net, args.batch_size, 20, args.steps, args.child == "tuned")))
        return
    times: dict[str, list[float]] = {"defaults": [], "tuned": []}
    for _ in range(args.rounds):
        for row in times:
            command = [sys.executable, "-m", "benchmarks.allocator", f"--child={row}", f"--net={args.net}"]
            command += [f"--batch-size={args.batch_size}", f"--steps={args.steps}"]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            times[row].append(json.loads(done.stdout) * 1e3)
    median = {row: statistics.median(values) for row, values in times.items()}
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} threads, {args.net}, batch {args.batch_size}, ", end="")
    print(f"{args.steps} steps after 20, median of {args.rounds} interleaved rounds\n")
    print("| malloc | ms per step | rounds |\n|---|---|---|")
    for row, value in median.items():
        print(f"| {row} | {value:.2f} | {', '.join(f'{v:.1f}' for v in times[row])} |")
    print(f"\ntuned / defaults: {median['tuned'] / median['defaults']:.3f}")


if __name__ == "__main__":
    main()
