"""The parts of ``benchmarks.gpu_check``: each runs the project's own commands as child processes
and appends its rows (a label and its figures) as they come, so that a part stopped by its time
limit keeps what it measured."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import torch
from packaging.requirements import Requirement
from packaging.version import Version

from benchmarks.__main__ import throughput, timed

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
# Dry runs: a tenth of the training images (64 of the tests' 640; 6,000 of Fashion-MNIST's), batch 16.
DRY_VAL, DRY_BATCH = 0.9, 16
DRY_LIMITS = ["--trainer.limit_val_batches=1", "--trainer.limit_test_batches=2"]


class PartTimeout(Exception):
    """The part's time ran out: the end of the output of the child it stopped, if any."""


class PartFailed(Exception):
    """A child process of the part failed: what failed, and the end of its output."""


@dataclass
class Check:
    """Where and how big a check runs: on the GPU, or ``dry`` (CPU, tiny sizes)."""

    dry: bool
    root: Path
    work: Path
    deadline: float = 0.0
    runs: int = 0
    tables: list = field(default_factory=list)  # a part's extra tables: (title, header, rows)
    medians: dict = field(default_factory=dict)  # (row, side): median img/s, for the parts after

    @property
    def accelerator(self) -> str:
        return "cpu" if self.dry else "gpu"

    @property
    def shrink(self) -> list[str]:
        """Template flags that make a dry run tiny: few training images, one validation batch."""
        if not self.dry:
            return []
        return [f"--data.val_size={DRY_VAL}", f"--data.batch_size={DRY_BATCH}", *DRY_LIMITS]

    def child(
        self, args: list[str], cwd: Path | None = None, must_succeed: bool = True, env: dict | None = None
    ) -> tuple[int, str]:
        """Run ``python ARGS`` (with ``env`` set) within the part's time; its exit status and output,
        also in a log named by the run's number and what it runs (in the archive)."""
        self.runs += 1
        what = next((a for a in args if not a.startswith("-")), "python").rsplit(".", 1)[-1]
        log = self.work / f"run{self.runs:02d}-{what}.log"
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "WANDB_MODE": "offline", "PYTHONPATH": path, **(env or {})}
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise PartTimeout
        with open(log, "w") as out:
            # A session of its own: on a timeout its whole group goes (DDP ranks, loader workers, W&B).
            child = subprocess.Popen(
                [sys.executable, *args],
                cwd=cwd or self.work,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                status = child.wait(timeout=left)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                raise PartTimeout("\n".join(log.read_text().strip().splitlines()[-30:])) from None
        text = log.read_text()
        if status and must_succeed:
            tail = text.strip().splitlines()[-30:] or ["no output"]
            raise PartFailed(f"{' '.join(args[:2])} exited {status}: {tail[-1][:200]}", "\n".join(tail))
        return status, text

    def fit(self, name: str, config: str, *flags: str, env: dict | None = None) -> dict:
        """``python -m app fit --config CONFIG FLAGS`` with the benchmark's timer; its record and wall s."""
        command = ["-m", "app", "fit", f"--config={CONFIGS / config}", f"--data.root={self.root}"]
        command += [f"--trainer.accelerator={self.accelerator}", f"--trainer.default_root_dir={self.work}"]
        command += [*self.shrink, *flags, timed(self.work, name)]
        start = time.perf_counter()
        self.child(command, env=env)
        wall = time.perf_counter() - start
        return {**json.loads((self.work / f"{name}.json").read_text()), "wall_seconds": wall}

    def loop(self, row, graphs: bool = False, profile: tuple | None = None, env: dict | None = None) -> dict:
        """``benchmarks.plain_loop`` with a row's settings (``graphs``: ``--cuda-graphs``; ``profile``:
        its file, warm-up and steps); its record and wall s."""
        device = "cpu" if self.dry else "cuda"
        loop = ["-m", "benchmarks.plain_loop", f"--root={self.root}", f"--epochs={row.epochs}"]
        loop += [f"--device={device}", f"--batch-size={row.batch}", f"--net={row.net}"]
        loop += [f"--precision={row.precision}", *(["--channels-last"] if row.channels_last else [])]
        loop += [f"--val-size={DRY_VAL}"] if self.dry else []
        loop += ["--cuda-graphs"] if graphs else []
        if profile:
            loop += [f"--profile={profile[0]}", "--profile-steps", *map(str, profile[1:])]
        start = time.perf_counter()
        _, text = self.child(loop, env=env)
        wall = time.perf_counter() - start
        return {} if profile else {**json.loads(text.strip().splitlines()[-1]), "wall_seconds": wall}


Rows = list[tuple[str, dict[str, float]]]


def gpu_tests(
    check: Check, rows: Rows, tests: tuple[str, ...] = (), label: str = "pytest -m gpu"
) -> str | None:
    """``pytest -m gpu`` (only ``tests``, in turn, where given): counts from its JUnit XML; on CPU
    every test skips, and says so. Dry, all of them is one file's: the suite's own run skips the rest."""
    if check.dry and not tests:
        tests = ("tests/test_gpu_training.py",)
    report = check.work / "pytest.xml"
    # -v: each test's line as it ends, so a part stopped by its limit still says which tests ran.
    args = ["-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", "-v", f"--junitxml={report}", *tests]
    args += ["-n", "0" if check.dry or tests else "4"]
    status, output = check.child(args, cwd=ROOT, must_succeed=False)
    if not report.exists():  # pytest stopped before running any test
        raise PartFailed(f"pytest exited {status} without a report", output.strip()[-3000:])
    suites = list(ET.parse(report).getroot().iter("testsuite"))
    counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    failed = counts["failures"] + counts["errors"]
    passed = counts["tests"] - failed - counts["skipped"]
    rows.append((label, {"passed": passed, "failed": failed, "skipped": counts["skipped"]}))
    if status or failed:
        raise PartFailed(f"pytest exited {status}: {failed} failed", output.strip()[-3000:])
    return "skipped: no CUDA" if passed == 0 and not torch.cuda.is_available() else None


def fashion_mnist_93(check: Check, rows: Rows) -> None:
    """``configs/fashion_mnist_93.yaml`` as users run it: test accuracy, training and fit seconds."""
    shrink = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=2"] if check.dry else []
    r = check.fit("fm93", "fashion_mnist_93.yaml", *shrink)
    figures = {"test acc": r["test_acc"], "training s": sum(r["train_seconds"]), "fit s": r["fit_seconds"]}
    rows.append(("configs/fashion_mnist_93.yaml", {**figures, "wall s": r["wall_seconds"]}))


def compile_vs_eager(check: Check, rows: Rows) -> None:
    """``--model.compile true`` against eager, 2 epochs each: the second epoch's ms per step, and
    the first epoch's extra seconds (the compilation). Dry: the one-layer net, the cheapest to compile."""
    net = "benchmarks.step_overhead.OneLayer" if check.dry else "MnistCNN"
    batch = DRY_BATCH if check.dry else 128
    flags = [f"--model.net={net}", f"--data.batch_size={batch}", "--trainer.max_epochs=2"]
    figures = {}
    for mode, extra in (("eager", []), ("compiled", ["--model.compile=true"])):
        r = check.fit(mode, "fashion_mnist.yaml", *flags, *extra)
        steps = r["train_samples"][-1] / batch
        figures[mode] = r["train_seconds"]
        figures[f"{mode} ms/step"] = 1000 * r["train_seconds"][-1] / steps
        figures[f"{mode} fit s"] = r["fit_seconds"]
    eager, compiled = figures.pop("eager"), figures.pop("compiled")
    figures["speed-up"] = figures["eager ms/step"] / figures["compiled ms/step"]
    figures["compile s"] = compiled[0] - eager[0]
    rows.append((f"{net.split('.')[-1]}, batch {batch}", figures))


def photos(check: Check, rows: Rows) -> None:
    """``benchmarks.photos --device cuda --train``: img/s of the three pipelines, and ResNet-18 on each."""
    if check.dry:
        sizes = ["--images=20", "--photo-size=64x48", "--epochs=1", "--sizes=32", "--batch-size=4"]
        sizes += ["--workers=0", "--device=cpu"]
    else:
        sizes = ["--images=640", "--epochs=2", "--sizes=224", "--workers=8", "--device=cuda"]
    _, text = check.child(["-m", "benchmarks.photos", *sizes, "--train"])
    # Its table's row: size | a | b | c | decode | b/a | c/a | train a | b | c | c/a
    (line,) = [line for line in text.splitlines() if line.startswith("| ") and " px |" in line]
    cells = [float(cell.split()[0]) for cell in line.strip("| \n").split("|")[1:]]
    names = ["a: reference img/s", "b: ours img/s", "c: resident img/s", "decode s", "b/a", "c/a"]
    names += ["train a img/s", "train b img/s", "train c img/s", "train c/a"]
    rows.append((line.split("|")[1].strip(), dict(zip(names, cells, strict=True))))


def torch_below_floor() -> str | None:
    """pyproject's torch requirement where the installed torch misses it (a GPU image's may), else None."""
    # A pattern, not tomllib: Python 3.10, which the project supports, has none.
    wanted = Requirement(re.search(r'"(torch[<>=~!][^"]*)"', (ROOT / "pyproject.toml").read_text())[1])
    installed = Version(torch.__version__.split("+")[0])
    return None if wanted.specifier.contains(installed, prereleases=True) else str(wanted)


def data_parallel(check: Check, rows: Rows) -> str | None:
    """The design card's command on one device: ``ddp`` and ``ddp_spawn`` fits (nccl on a GPU, gloo on
    CPU) and a ``dp`` fit, one epoch each.

    Skipped, and says why, where the installed torch is older than the project supports. Dry: the
    ``ddp`` fit alone (the part's wiring; 2-process ``ddp_spawn`` and ``dp`` have tests of their own)."""
    backend = "gloo" if check.dry else "nccl"
    floor = torch_below_floor()
    if floor:
        return f"skipped: torch {torch.__version__} here, the project needs {floor}"
    strategies = (("ddp", f"ddp, 1 process, {backend}"), ("ddp_spawn", f"ddp_spawn, 1 process, {backend}"))
    every = (*strategies, ("dp", "dp, 1 device"))
    for strategy, label in every[:1] if check.dry else every:
        r = check.fit(
            strategy,
            "fashion_mnist.yaml",
            f"--trainer.strategy={strategy}",
            "--trainer.devices=1",
            "--trainer.max_epochs=1",
        )
        figures = {"test acc": r["test_acc"], "img/s, epoch 1": throughput(r)["img_per_s"]}
        figures["fit s"] = r["fit_seconds"]
        rows.append((label, {**figures, "wall s": r["wall_seconds"]}))
    return None
