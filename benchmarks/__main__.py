"""``python -m benchmarks``: the template against a plain loop and a script-style loop, side by side.

Each run is a child process on the same data (Fashion-MNIST, the template's train/val split),
model (MnistCNN) and recipe (SGD 0.01, batch 128, cosine); a Markdown table goes to stdout.
Throughput counts training steps only (validation excluded) and leaves out the first epoch
(warm-up) when there are several.

``python -m benchmarks --recipe CONFIG`` times a preset instead: ``python -m app fit --config
CONFIG`` run ``--repeats`` times, each run's training time and test accuracy.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import count

ROOT = Path(__file__).resolve().parents[1]


def timed(folder: Path, name: str) -> str:
    """The flag that adds the benchmark's timer to a template run, writing ``folder/name.json``."""
    path = str(folder / f"{name}.json")
    timer = {"class_path": "benchmarks.epoch_timer.EpochTimer", "init_args": {"path": path}}
    return f"--trainer.callbacks+={json.dumps(timer)}"


def runs(args: argparse.Namespace, folder: Path) -> dict[str, list[str]]:
    template = [
        "-m",
        "app",
        "fit",
        f"--config={ROOT / 'configs' / 'fashion_mnist.yaml'}",
        f"--data.root={args.root}",
    ]
    template += [f"--trainer.max_epochs={args.epochs}", f"--trainer.accelerator={args.device}"]
    device = "cuda" if args.device == "gpu" else "cpu"
    common = [f"--root={args.root}", f"--epochs={args.epochs}", f"--device={device}"]
    return {
        "a: template (resident loader)": [*template, "--data.loader=resident", timed(folder, "a")],
        "b: template, --data.loader torch": [*template, "--data.loader=torch", timed(folder, "b")],
        "c: plain loop over tensors (limit)": ["-m", "benchmarks.plain_loop", *common],
        "d: script-style loop (DataLoader, DDP)": ["-m", "benchmarks.script_loop", *common],
    }


def measure(name: str, command: list[str], folder: Path) -> dict:
    """Run one child; its figures, with its peak resident memory (MB) from the kernel."""
    log = folder / f"{name[0]}.log"
    with open(log, "w") as out:
        child = subprocess.Popen([sys.executable, *command], cwd=folder, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        sys.exit(f"error: run {name!r} failed; its output is in {log}")
    result_file = folder / f"{name[0]}.json"
    text = result_file.read_text() if result_file.exists() else log.read_text().strip().splitlines()[-1]
    return {**json.loads(text), "peak_rss_mb": usage.ru_maxrss / 1024}


def throughput(result: dict) -> dict:
    """img/s and s/epoch of a run's training steps, its first epoch left out when there are more."""
    seconds, samples = result["train_seconds"], result["train_samples"]
    if len(seconds) > 1:
        seconds, samples = seconds[1:], samples[1:]
    return {**result, "img_per_s": sum(samples) / sum(seconds), "s_per_epoch": statistics.mean(seconds)}


def median_run(results: list[dict]) -> dict:
    """The run with the median img/s (the lower middle one for an even count)."""
    ranked = sorted(results, key=lambda r: r["img_per_s"])
    return ranked[(len(ranked) - 1) // 2]


def loaders(args: argparse.Namespace, folder: Path) -> None:
    """The a/b/c/d table and its ratios; each run's median over ``--repeats`` interleaved rounds."""
    print(f"{args.epochs} epochs; median of {args.repeats} interleaved round(s)\n")
    commands = runs(args, folder)
    rounds = [
        {name: throughput(measure(name, command, folder)) for name, command in commands.items()}
        for _ in range(args.repeats)
    ]
    results = {name: median_run([r[name] for r in rounds]) for name in commands}
    a, b, c, d = results.values()
    print("| run | img/s | s/epoch | test acc | peak RSS MB |\n|---|---|---|---|---|")
    for name, r in results.items():
        figures = (
            f"{r['img_per_s']:.0f} | {r['s_per_epoch']:.1f} | {r['test_acc']:.4f} | {r['peak_rss_mb']:.0f}"
        )
        print(f"| {name} | {figures} |")
    print(
        f"\na/c = {a['img_per_s'] / c['img_per_s']:.2f}, a/d = {a['img_per_s'] / d['img_per_s']:.2f}, "
        f"a/b = {a['img_per_s'] / b['img_per_s']:.2f}"
    )
    if args.startup_repeats:
        seconds = startup_seconds(args.startup_repeats)
        print(f"`python -m app --help` start-up: {seconds:.2f} s (median of {args.startup_repeats})")


def recipe(args: argparse.Namespace, folder: Path) -> None:
    """Time to accuracy of a preset, run as users run it (default logger included)."""
    print(f"`python -m app fit --config {args.recipe}`, {args.repeats} runs\n")
    print("| run | training s (steps) | fit s (with validation) | test acc | peak RSS MB |")
    print("|---|---|---|---|---|")
    accuracies, fit_seconds = [], []
    for run in range(1, args.repeats + 1):
        command = ["-m", "app", "fit", f"--config={Path(args.recipe).resolve()}", f"--data.root={args.root}"]
        command += [f"--trainer.accelerator={args.device}", timed(folder, str(run))]
        r = measure(str(run), command, folder)
        accuracies.append(r["test_acc"])
        fit_seconds.append(r["fit_seconds"])
        figures = f"{sum(r['train_seconds']):.1f} | {r['fit_seconds']:.1f} | {r['test_acc']:.4f}"
        print(f"| {run} | {figures} | {r['peak_rss_mb']:.0f} |")
    print(
        f"\nmedian: fit {statistics.median(fit_seconds):.1f} s (range {min(fit_seconds):.1f} to "
        f"{max(fit_seconds):.1f}), test acc {statistics.median(accuracies):.4f}"
    )


def startup_seconds(repeats: int) -> float:
    """Median wall time of ``python -m app --help``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "app", "--help"], cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or "CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", default=str(ROOT / "datasets"), help="data folder (Fashion-MNIST)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--device", default="gpu" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--recipe", metavar="CONFIG", help="time a preset's runs instead")
    parser.add_argument("--repeats", type=count, default=3, help="rounds of runs (medians are shown)")
    parser.add_argument("--startup-repeats", type=int, default=5, help="runs of `app --help` timed; 0: none")
    args = parser.parse_args()
    machine = torch.cuda.get_device_name() if args.device == "gpu" else cpu_name()
    print(f"Machine: {machine}, {os.cpu_count()} cores; torch {torch.__version__}\n")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        (recipe if args.recipe else loaders)(args, Path(tmp))


if __name__ == "__main__":
    main()
