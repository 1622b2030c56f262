"""Start-up against its floor, ``import torch, lightning`` (figures in benchmarks/README.md).

Whole processes, rounds interleaved, medians: ``python -c "import torch, lightning"``; ``python -m app fit
--help``; ``python -m app fit`` of a preset from process start to its first training step (W&B offline), and
the same without a logger (the difference is what starting W&B's run costs); and W&B's run started alone,
``import wandb; wandb.init()`` offline in a bare interpreter (the least that difference can be).
Beside the wall-clock seconds, each process's CPU seconds (user and system, the whole process), which a
machine shared with other jobs moves far less.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import count
from benchmarks.tune import FIRST_STEP

ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds() -> float:
    """User and system seconds of the child processes waited for so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(command: list[str], folder: Path, mark: Path | None = None) -> tuple[float, float]:
    """Seconds from the start of ``command`` to its end, or to the time its first step wrote to ``mark``;
    and the CPU seconds of the whole process."""
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT)}
    cpu, start = cpu_seconds(), time.time()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    end = time.time()
    if done.returncode:
        sys.exit(f"error: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return (float(mark.read_text()) if mark else end) - start, cpu_seconds() - cpu


def first_step(mark: Path) -> str:
    """The flag of the callback that writes the first step's time to ``mark`` and stops the fit."""
    return "--trainer.callbacks+=" + json.dumps({"class_path": FIRST_STEP, "init_args": {"file": str(mark)}})


def wandb_alone(folder: Path, mark: Path) -> str:
    """A program that starts a W&B run offline, writes the time to ``mark``, and ends the run."""
    return (
        f"import time, wandb; run = wandb.init(mode='offline', dir={str(folder)!r}, project='startup'); "
        f"open({str(mark)!r}, 'w').write(str(time.time())); run.finish()"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", default=str(ROOT / "datasets"), help="the preset's data folder")
    parser.add_argument("--config", default="configs/fashion_mnist_fast.yaml", help="the preset fit runs")
    parser.add_argument("--rounds", type=count, default=5)
    args = parser.parse_args()
    python = sys.executable
    names = ["import torch, lightning", "app fit --help", "app fit, first step", "the same, no logger"]
    names += ["wandb.init alone"]
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for r in range(args.rounds):
            step, bare, alone = folder / f"step{r}", folder / f"bare{r}", folder / f"wandb{r}"
            fit = [python, "-m", "app", "fit", f"--config={ROOT / args.config}", f"--data.root={args.root}"]
            fit += ["--trainer.enable_progress_bar=false", "--test_after_fit=false"]
            commands = {
                "import torch, lightning": ([python, "-c", "import torch, lightning"], None),
                "app fit --help": ([python, "-m", "app", "fit", "--help"], None),
                "app fit, first step": ([*fit, first_step(step)], step),
                "the same, no logger": ([*fit, first_step(bare), "--trainer.logger=false"], bare),
                "wandb.init alone": ([python, "-c", wandb_alone(folder, alone)], alone),
            }
            order = list(commands) if r % 2 == 0 else list(commands)[::-1]
            for name in order:
                rows[name].append(timed(commands[name][0], folder, commands[name][1]))
            print(
                f"round {r}: " + ", ".join(f"{n} {rows[n][-1][0]:.2f} s" for n in commands), file=sys.stderr
            )
    floor = [statistics.median(v[i] for v in rows[names[0]]) for i in (0, 1)]
    print(
        f"| command | wall s (median of {args.rounds}) | / import | CPU s | / import | wall s, each round |"
    )
    print("|---|---|---|---|---|---|")
    for name, values in rows.items():
        wall, cpu = (statistics.median(v[i] for v in values) for i in (0, 1))
        each = ", ".join(f"{v[0]:.2f}" for v in values)
        print(
            f"| `{name}` | {wall:.2f} | {wall / floor[0]:.2f} | {cpu:.2f} | {cpu / floor[1]:.2f} | {each} |"
        )


if __name__ == "__main__":
    main()
