"""What ``python -m app tune`` costs, side by side (figures in benchmarks/README.md).

- ``overhead``: a study of N trials against the same N fits run by hand one after another (rounds
  interleaved, medians): what tune adds per trial.
- ``startup``: a trial is a process: seconds from its start to its first training step, and what the
  libraries a fit never uses cost it at import.
- ``pruning``: a study with the space's pruner against the same study without: epochs spent, best value.
"""

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from lightning import Callback, Trainer

from benchmarks.common import count, seconds

ROOT = Path(__file__).resolve().parents[1]
PRESET = str(ROOT / "configs" / "fashion_mnist_fast.yaml")
SPACE = ROOT / "configs" / "sweeps" / "fashion_mnist_fast.yaml"
UNUSED = ("wandb", "litdata", "matplotlib", "optuna", "boto3", "tensorboard")


def fit_flags(args: argparse.Namespace) -> list[str]:
    return [
        f"--config={PRESET}",
        f"--data.root={args.root}",
        f"--trainer.max_epochs={args.epochs}",
        f"--trainer.limit_train_batches={args.limit}",
        "--trainer.enable_progress_bar=false",
    ]


def overhead(args: argparse.Namespace) -> None:
    lrs = [round(0.1 + 0.05 * i, 3) for i in range(args.trials)]
    space = {
        "method": "grid",
        "metric": {"name": "val/acc"},
        "parameters": {"model.optimizer.lr": {"values": lrs}},
    }
    tune_s, hand_s = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "space.yaml"
        path.write_text(yaml.safe_dump(space))
        for r in range(args.rounds):
            arms = [("tune", tune_s), ("hand", hand_s)]
            for name, times in arms if r % 2 == 0 else arms[::-1]:
                folder = Path(tmp) / f"{name}{r}"
                folder.mkdir()
                if name == "tune":
                    times.append(
                        seconds(
                            [sys.executable, "-m", "app", "tune", *fit_flags(args), f"--tune.space={path}"],
                            folder,
                        )
                    )
                else:
                    times.append(
                        sum(
                            seconds(
                                [
                                    sys.executable,
                                    "-m",
                                    "app",
                                    "fit",
                                    *fit_flags(args),
                                    f"--model.optimizer.lr={lr}",
                                    "--test_after_fit=false",
                                ],
                                folder,
                            )
                            for lr in lrs
                        )
                    )
                print(f"round {r} {name}: {times[-1]:.1f} s", file=sys.stderr)
    tune, hand = statistics.median(tune_s), statistics.median(hand_s)
    per_trial = (tune - hand) / args.trials
    print(f"| {args.trials} fits by hand | {hand:.1f} s | {hand / args.trials:.1f} s a fit |")
    print(
        f"| the same {args.trials} as a tune study | {tune:.1f} s | +{per_trial:.2f} s a trial "
        f"({100 * per_trial / (hand / args.trials):.1f} % of a fit); x{tune / hand:.3f} in all |"
    )


FIRST_STEP = "benchmarks.tune.FirstStep"


class FirstStep(Callback):
    """Writes the wall time of the first training step to ``file`` and stops the fit there.

    Args:
        file: where the time goes.
    """

    def __init__(self, file: str) -> None:
        self.file = Path(file)

    def on_train_batch_start(self, trainer: Trainer, *_) -> None:
        self.file.write_text(str(time.time()))
        trainer.should_stop = True


def startup(args: argparse.Namespace) -> None:
    waits, imports = [], {name: [] for name in UNUSED}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            mark = Path(tmp) / f"step{r}"
            probe = json.dumps({"class_path": FIRST_STEP, "init_args": {"file": str(mark)}})
            command = [
                sys.executable,
                "-X",
                "importtime",
                "-m",
                "app",
                "fit",
                *fit_flags(args),
                "--test_after_fit=false",
                f"--trainer.callbacks+={probe}",
            ]
            started = time.time()
            done = subprocess.run(
                command,
                cwd=tmp,
                capture_output=True,
                text=True,
                env={**__import__("os").environ, "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT)},
            )
            if done.returncode:
                sys.exit(f"error: {done.stderr[-2000:]}")
            waits.append(float(mark.read_text()) - started)
            for name in UNUSED:
                # -X importtime: "import time: SELF | CUMULATIVE | NAME", each module once, its cumulative
                # time with what it imports.
                rows = [
                    line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")
                ]
                imports[name].append(sum(int(row[1]) for row in rows if row[2].strip() == name) / 1e6)
    print(
        f"| a trial's start to its first step | {statistics.median(waits):.2f} s (median of {args.rounds}) |"
    )
    for name, values in imports.items():
        print(f"| of which importing {name} | {statistics.median(values):.2f} s |")


def pruning(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = args.work or tmp
        for arm, extra in (
            ("successive halving (the space's hyperband)", []),
            ("no pruner", ["--tune.pruner=optuna.pruners.NopPruner"]),
        ):
            folder = Path(tmp) / str(len(rows))
            folder.mkdir(parents=True)
            spent = seconds(
                [
                    sys.executable,
                    "-m",
                    "app",
                    "tune",
                    *fit_flags(args),
                    f"--tune.space={SPACE}",
                    f"--tune.trials={args.trials}",
                    *extra,
                ],
                folder,
            )
            (study,) = (folder / "runs" / "tune").iterdir()
            trials = list(csv.DictReader((study / "trials.csv").open()))
            epochs = sum(len((study / t["run"] / "reports.jsonl").read_text().splitlines()) for t in trials)
            best = max(float(t["value"]) for t in trials if t["value"])
            rows.append(
                f"| {arm} | {args.trials} trials | {epochs} epochs | val/acc {best:.4f} | {spent:.0f} s |"
            )
            print(rows[-1], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["overhead", "startup", "pruning"])
    parser.add_argument(
        "--root", default="datasets", help="--data.root (Debian's Fashion-MNIST is found anyway)"
    )
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rounds", type=count, default=3)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--limit", type=float, default=1.0, help="--trainer.limit_train_batches")
    parser.add_argument("--work", help="pruning: a folder to keep the studies in (default: temporary)")
    args = parser.parse_args()
    globals()[args.what](args)


if __name__ == "__main__":
    main()
