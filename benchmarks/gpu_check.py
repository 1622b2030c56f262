"""``python -m benchmarks.gpu_check``: the GPU figures of benchmarks/README.md in prepared runs.

``make gpu-check`` runs its default parts on a GPU machine, within 420 s with the carried wheels'
install on an H100's figures (each part's budget printed at the start): the template against the hand-written
loop, timed alike in interleaved rounds (MnistCNN at batch 128: as users run it, and with its features
off), then ``--model.cuda_graphs true`` against the loop graphed the same way, with what torch.compile
did (``benchmarks/gpu_steps.py``). The others, by ``--parts`` (``make gpu-check PARTS=...``), in order
of value: the GPU tests of the step (host syncs, CUDA graphs), ``configs/fashion_mnist_93.yaml``, a
profile of each loop's steps, FastCNN at 512 against the loop, all of ``pytest -m gpu``,
``--model.compile true`` against eager, the photo pipelines, and 1-process ``ddp``/``ddp_spawn`` and
``dp`` fits (``benchmarks/gpu_parts.py``). Each part has its own time limit, its budget; one that fails
or runs out of time is reported and the next one runs. ``--dry`` runs every part on CPU at tiny sizes,
on tiny random data, on the least work that runs its code (tests/test_gpu_check.py, in CI; ``--root``
is not read). After each part, three
files in OUT are written anew: ``gpu-check.md`` (Markdown tables for benchmarks/README.md),
``gpu-check.json`` (the machine, every part's status, budget, seconds, figures and tables) and
``gpu-check-logs.tar.gz`` (every child's log, the timers' records, the profiles and their traces).
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import lightning
import numpy as np
import torch

from benchmarks.__main__ import cpu_name
from benchmarks.gpu_parts import (
    ROOT,
    Check,
    PartFailed,
    PartTimeout,
    compile_vs_eager,
    data_parallel,
    fashion_mnist_93,
    gpu_tests,
    photos,
)
from benchmarks.gpu_steps import (
    FAST,
    GRAPH_SIDES,
    GRAPHED,
    MNIST,
    RATIO_SIDES,
    ROUNDS,
    START,
    budget,
    cuda_graphs,
    profiles,
    ratios,
    ratios_fast,
    step_tests,
)

DRY_LIMIT = 300  # seconds a dry part may take: CI's 2 cores are shared
INSTALL = 30  # seconds the carried wheels' install takes on the GPU machine
DEFAULT_WITHIN = 420  # the default parts and the install, so that a rerun of any part fits the lease
# The profile: a template run and the loop to their window (about 50 steps), and the graphed template.
PROFILE = 2 * START["template"] + START["loop"] + 15 + 3 * 2

# Key (--parts), title, function, seconds budgeted on the GPU (its limit), by value. Those not computed
# from benchmarks/gpu_steps.py's figures are the H100 run's of 2026-11-27 (benchmarks/README.md).
PARTS = [
    ("ratios", "template / hand-written loop", ratios, budget(MNIST, RATIO_SIDES, ROUNDS)),
    ("graphs", "cuda graphs / hand-written loop, graphed", cuda_graphs, budget(GRAPHED, GRAPH_SIDES, 2)),
    ("steptests", "pytest, host syncs and CUDA graphs", step_tests, 120),
    ("fm93", "configs/fashion_mnist_93.yaml", fashion_mnist_93, 45),
    ("profile", "step profile", profiles, PROFILE),
    ("fast", "template / hand-written loop, FastCNN", ratios_fast, budget(FAST, RATIO_SIDES, ROUNDS)),
    ("tests", "pytest -m gpu", gpu_tests, 100),
    ("compile", "compile vs eager", compile_vs_eager, 90),
    ("photos", "photos (benchmarks.photos)", photos, 75),
    ("dp", "ddp, ddp_spawn and dp fits", data_parallel, 60),
]
DEFAULT_PARTS = ["ratios", "graphs"]  # on the GPU; --dry runs them all
SECOND_RUN = ["steptests", "fm93", "profile"]  # in the same lease, after the default parts
ARCHIVE = "gpu-check-logs.tar.gz"


def machine(dry: bool) -> dict[str, str | None]:
    """The device, its driver, and the versions the figures depend on."""
    cuda = torch.cuda.is_available() and not dry
    driver = None
    if cuda and shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        driver = (subprocess.run(query, capture_output=True, text=True).stdout.split() or [None])[0]
    commit = None
    if shutil.which("git"):  # a GPU image may have none
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        commit = done.stdout.strip() or None
    return {
        "device": torch.cuda.get_device_name() if cuda else cpu_name(),
        "driver": driver,
        "cores": str(os.cpu_count()),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "lightning": lightning.__version__,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "commit": commit,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "dry (CPU, tiny sizes)" if dry else "gpu",
    }


def write_tiny_fashion_mnist(root: Path, train: int = 640, test: int = 256) -> Path:
    """Random images and labels in Fashion-MNIST's IDX files: what a dry run trains on, in seconds."""
    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", train), ("t10k", test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            # IDX: two zero bytes, the type (8: unsigned byte), the dimensions' count, then each (big-endian).
            header = bytes([0, 0, 8, array.ndim]) + np.array(array.shape, ">u4").tobytes()
            (raw / f"{prefix}-{kind}-ubyte").write_bytes(header + array.tobytes())
    return root


def number(value: float | str) -> str:
    if isinstance(value, str):  # n/a: a figure the device has not (sync counts on CPU)
        return value
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}".rstrip("0").rstrip(".")


def markdown(about: dict, parts: list[dict]) -> str:
    """The table: one line per row of each part; the part's status and seconds on its first line."""
    head = ", ".join(f"{k} {v}" for k, v in about.items() if v is not None)
    lines = [f"{head}\n", "| part | row | figures | status | s |", "|---|---|---|---|---|"]
    for part in parts:
        rows = part["rows"] or [{"row": "-", "figures": {}}]
        for i, row in enumerate(rows):
            figures = ", ".join(f"{k} {number(v)}" for k, v in row["figures"].items()) or "-"
            status = part["status"].replace("|", "\\|").replace("\n", " ")  # one table cell
            status, seconds = (status, f"{part['seconds']:.0f}") if i == 0 else ("", "")
            lines.append(
                f"| {part['part'] if i == 0 else ''} | {row['row']} | {figures} | {status} | {seconds} |"
            )
    for part in parts:
        for table in part.get("tables", []):
            lines += ["", f"{part['part']}, {table['title']}:", ""]
            lines += ["| " + " | ".join(table["header"]) + " |", "|" + "---|" * len(table["header"])]
            lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in table["rows"]]
    return "\n".join(lines) + "\n"


def budgets(keys: list[str]) -> str:
    """The GPU budget of each part named, and their sum with the wheels' install."""
    chosen = [(key, limit) for key, _, _, limit in PARTS if key in keys]
    each = ", ".join(f"{key} {limit:.0f} s" for key, limit in chosen)
    return f"{each}; with the install ({INSTALL} s): {sum(limit for _, limit in chosen) + INSTALL:.0f} s"


def archive(work: Path, out: Path) -> None:
    """Every child's log, the timers' records, the profiles and their traces: one file in ``out``."""
    with tarfile.open(out / f"{ARCHIVE}.part", "w:gz") as tar:
        for path in sorted(work.iterdir()):
            if path.is_file() and path.suffix in (".log", ".json", ".gz", ".xml") and path.name != ARCHIVE:
                tar.add(path, arcname=path.name)
    (out / f"{ARCHIVE}.part").replace(out / ARCHIVE)


def run(check: Check, parts: list[tuple[str, Callable, float]], out: Path) -> list[dict]:
    """Each part (title, function, seconds) in turn within its time limit; the files rewritten after each."""
    about, done = machine(check.dry), []
    for i, (title, part, limit) in enumerate(parts, 1):
        check.deadline = time.monotonic() + limit
        check.tables = []
        rows: list = []
        record: dict = {"part": title, "limit s": limit}
        start = time.perf_counter()
        try:
            record["status"] = part(check, rows) or "ok"
        except PartTimeout as timeout:
            record["status"] = f"timeout after {limit:.0f} s"
            if timeout.args and timeout.args[0]:
                record["log_tail"] = timeout.args[0]
        except PartFailed as error:
            record["status"], record["log_tail"] = f"failed: {error.args[0]}", error.args[1]
        except Exception as error:  # a broken part is reported; the next one still runs
            record["status"] = f"failed: {type(error).__name__}: {error}"
        record["seconds"] = time.perf_counter() - start
        record["rows"] = [{"row": label, "figures": figures} for label, figures in rows]
        if check.tables:
            record["tables"] = [dict(zip(("title", "header", "rows"), t, strict=True)) for t in check.tables]
        done.append(record)
        seconds = f"{record['seconds']:.0f} s of {limit:.0f}"
        print(f"[{i}/{len(parts)}] {title}: {record['status']} ({seconds})", flush=True)
        document = {"machine": about, "runs": check.runs, "parts": done}  # runs: the children started
        (out / "gpu-check.json").write_text(json.dumps(document, indent=2) + "\n")
        (out / "gpu-check.md").write_text(markdown(about, done))
        archive(check.work, out)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", default="gpu-check", help=f"folder for gpu-check.md, .json and {ARCHIVE}")
    parser.add_argument("--root", default=str(ROOT / "datasets"), help="data folder (Fashion-MNIST)")
    parser.add_argument("--dry", action="store_true", help="on CPU, at tiny sizes, on tiny random data")
    keys = [key for key, *_ in PARTS]
    parser.add_argument(
        "--parts", nargs="+", choices=keys, help=f"run these parts (default: {' '.join(DEFAULT_PARTS)})"
    )
    args = parser.parse_args()
    args.parts = args.parts or (keys if args.dry else DEFAULT_PARTS)
    # Absolute: the children run in a folder of their own.
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"GPU budget (an H100's figures): {budgets(args.parts)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:
        root = write_tiny_fashion_mnist(Path(work, "data")) if args.dry else Path(args.root).resolve()
        check = Check(dry=args.dry, root=root, work=Path(work))
        chosen = [(title, part, DRY_LIMIT if args.dry else limit) for key, title, part, limit in PARTS]
        chosen = [part for part, (key, *_) in zip(chosen, PARTS, strict=True) if key in args.parts]
        parts = run(check, chosen, out)
    failed = [p["part"] for p in parts if p["status"] != "ok" and not p["status"].startswith("skipped")]
    print(f"{out / 'gpu-check.md'}: {len(parts) - len(failed)} of {len(parts)} parts ok or skipped")
    if not args.dry and set(args.parts) == set(DEFAULT_PARTS):
        print(
            f'next, in the same lease: make gpu-check PARTS="{" ".join(SECOND_RUN)}" ({budgets(SECOND_RUN)})'
        )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
