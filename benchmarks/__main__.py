"""``python -m benchmarks``: the template against a plain loop and a seed-style loop, side by side.

Each run is a child process on the same data (Fashion-MNIST, the template's train/val split),
model (MnistCNN) and recipe (SGD 0.01, batch 128, cosine); a Markdown table goes to stdout.
Throughput counts training steps only (validation excluded) and leaves out the first epoch
(warm-up) when there are several.
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

ROOT = Path(__file__).resolve().parents[1]


def runs(args: argparse.Namespace, folder: Path) -> dict[str, list[str]]:
    template = [
        "-m",
        "app",
        "fit",
        f"--config={ROOT / 'configs' / 'fashion_mnist.yaml'}",
        f"--data.root={args.root}",
    ]
    template += [f"--trainer.max_epochs={args.epochs}", f"--trainer.accelerator={args.device}"]
    timer = {"class_path": "benchmarks.epoch_timer.EpochTimer", "init_args": {"path": ""}}
    device = "cuda" if args.device == "gpu" else "cpu"
    common = [f"--root={args.root}", f"--epochs={args.epochs}", f"--device={device}"]

    def timed(name: str) -> str:
        timer["init_args"]["path"] = str(folder / f"{name}.json")
        return f"--trainer.callbacks+={json.dumps(timer)}"

    return {
        "a: template (resident loader)": [*template, "--data.loader=resident", timed("a")],
        "b: template, --data.loader torch": [*template, "--data.loader=torch", timed("b")],
        "c: plain loop over tensors (limit)": ["-m", "benchmarks.plain_loop", *common],
        "d: seed-style loop (DataLoader, DDP)": ["-m", "benchmarks.seed_loop", *common],
    }


def measure(name: str, command: list[str], folder: Path) -> dict:
    """Run one child; its figures, with its peak resident memory from the kernel."""
    log = folder / f"{name[0]}.log"
    with open(log, "w") as out:
        child = subprocess.Popen([sys.executable, *command], cwd=folder, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        sys.exit(f"error: run {name!r} failed; its output is in {log}")
    result_file = folder / f"{name[0]}.json"
    text = result_file.read_text() if result_file.exists() else log.read_text().strip().splitlines()[-1]
    result = json.loads(text)
    seconds, samples = result["train_seconds"], result["train_samples"]
    if len(seconds) > 1:
        seconds, samples = seconds[1:], samples[1:]
    return {
        "img_per_s": sum(samples) / sum(seconds),
        "s_per_epoch": statistics.mean(seconds),
        "test_acc": result["test_acc"],
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def startup_seconds(repeats: int = 5) -> float:
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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        results = {name: measure(name, command, folder) for name, command in runs(args, folder).items()}
    a, b, c, d = results.values()
    machine = torch.cuda.get_device_name() if args.device == "gpu" else cpu_name()
    print(f"Machine: {machine}, {os.cpu_count()} cores; torch {torch.__version__}; {args.epochs} epochs\n")
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
    print(f"`python -m app --help` start-up: {startup_seconds():.2f} s (median of 5)")


if __name__ == "__main__":
    main()
