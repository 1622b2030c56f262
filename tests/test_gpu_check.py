"""The GPU check (``make gpu-check``): its dry run, every part for real on CPU at tiny sizes, so that
the script is ready the day a GPU is lent; and how it reports a part that fails or runs out of time."""

import json
import math
import os
import platform
import subprocess
import sys
import tarfile

import pytest
import torch
import yaml
from helpers.cli import ROOT, run_app

from benchmarks import gpu_check
from benchmarks.gpu_check import (
    ARCHIVE,
    DEFAULT_PARTS,
    DEFAULT_WITHIN,
    INSTALL,
    PARTS,
    SECOND_RUN,
    machine,
    run,
)
from benchmarks.gpu_parts import Check, torch_below_floor
from benchmarks.gpu_steps import MNIST, features_off, interleaved, ratio_rows

# Parts that need CUDA, skipped on CPU (the tests' parts still list their skipped tests).
NEED_CUDA = {"pytest -m gpu": "skipped: no CUDA", "pytest, host syncs and CUDA graphs": "skipped: no CUDA"}
GRAPHS = "cuda graphs / hand-written loop, graphed"
NEED_CUDA[GRAPHS] = "skipped: CUDA graphs need CUDA"
LEASE, MACHINE_START = 900, 120  # a GPU lease's seconds, and its machine's start within them


# Starts a child process per run of the check, one after the other; among the long tests.
@pytest.mark.full
@pytest.mark.distributed
def test_the_dry_run_measures_every_part_and_writes_the_table_the_json_and_the_archive(tmp_path):
    out = tmp_path / "out"
    # A relative OUT, as `make gpu-check` has it by default: the children run in a folder of their own.
    relative = os.path.relpath(out, ROOT)
    command = [
        "make",
        "--no-print-directory",
        "gpu-check",
        "DRY=1",
        f"OUT={relative}",
        f"PYTHON={sys.executable}",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == sorted([ARCHIVE, "gpu-check.json", "gpu-check.md"])

    record = json.loads((out / "gpu-check.json").read_text())
    assert record["machine"]["torch"] == torch.__version__ and record["machine"]["mode"].startswith("dry")
    parts = {part["part"]: part for part in record["parts"]}
    assert list(parts) == [title for _, title, _, _ in PARTS]
    for title, part in parts.items():
        skipped = title in NEED_CUDA and not torch.cuda.is_available()
        assert part["status"] == (NEED_CUDA[title] if skipped else "ok"), part
        assert (part["rows"] or title == GRAPHS) and part["seconds"] > 0, part
        for row in part["rows"]:
            figures = row["figures"].values()
            # n/a: what only CUDA measures (the profile's kernel time, GPU ops, syncs).
            numbers = [v for v in figures if v != "n/a"]
            assert numbers and all(isinstance(v, int | float) and math.isfinite(v) for v in numbers), row

    # The template against the loop, each side's ratio to the loop; dry, in one round (the rounds'
    # order: test_rounds_interleave_the_sides).
    for title in ("template / hand-written loop", "template / hand-written loop, FastCNN"):
        ratios = {row["row"].split(": ")[1]: row["figures"] for row in parts[title]["rows"]}
        assert list(ratios) == ["hand-written loop", "template as users run it", "template, features off"]
        assert all(f["rounds"] == 1 and f["img/s"] > 0 and f["timed s, least"] > 0 for f in ratios.values())
        for side in ("template as users run it", "template, features off"):
            assert ratios[side]["min"] <= ratios[side]["/ ref"] <= ratios[side]["max"]
        (runs,) = [t for t in parts[title]["tables"] if t["title"] == "each run"]
        assert [r[1] for r in runs["rows"]] == list(ratios)
    # The data-parallel part, dry: its ddp fit alone, 1 process on gloo.
    assert [row["row"] for row in parts["ddp, ddp_spawn and dp fits"]["rows"]] == ["ddp, 1 process, gloo"]
    # The profile: a row per loop, its top CPU rows as a table, a trace of each.
    profile = parts["step profile"]
    assert [row["row"].split(": ")[1] for row in profile["rows"]] == [
        "template as users run it",
        "hand-written loop",
    ]
    assert all(row["figures"]["step p50 ms"] > 0 for row in profile["rows"])
    assert [len(table["rows"]) for table in profile["tables"]] == [8, 8]

    # The archive: every child's log, the profiles and their traces.
    with tarfile.open(out / ARCHIVE) as tar:
        names = tar.getnames()
    assert len([n for n in names if n.startswith("run") and n.endswith(".log")]) == record["runs"]
    assert len([n for n in names if n.startswith("profile-") and n.endswith(".trace.json.gz")]) == 2

    # The budgets first, then one progress line per part, in order; the table has a line for each row.
    assert done.stdout.splitlines()[1].startswith("GPU budget (an H100's figures): ratios ")
    progress = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert [line.split("] ", 1)[1].split(": ")[0] for line in progress] == list(parts)
    table, *tables = (out / "gpu-check.md").read_text().split("\n\n")[1:]
    for part in parts.values():
        for row in part["rows"]:
            assert f"| {row['row']} |" in table
    lines = [line for line in table.splitlines() if line.startswith("|")]
    # Header, rule, rows; a part without rows has one line.
    assert len(lines) == 2 + sum(max(1, len(part["rows"])) for part in parts.values())
    assert "| aten::" in "".join(tables)  # the profile's tables follow


def test_the_default_parts_leave_a_rerun_of_any_part_within_the_lease():
    limits = {key: limit for key, _, _, limit in PARTS}
    default = sum(limits[key] for key in DEFAULT_PARTS) + INSTALL
    assert default <= DEFAULT_WITHIN
    assert MACHINE_START + default + max(limits.values()) <= LEASE
    assert MACHINE_START + default + sum(limits[key] for key in SECOND_RUN) <= LEASE
    assert list(limits)[: len(DEFAULT_PARTS)] == DEFAULT_PARTS  # the most valuable first


def test_features_off_drops_the_logger_the_pictures_and_the_periodic_checkpoint_and_plainer_bar(tmp_path):
    result = run_app("fit", "--print_config", *features_off(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    config = yaml.safe_load(result.stdout)
    defaults = yaml.safe_load((ROOT / "configs" / "defaults.yaml").read_text())["trainer"]["callbacks"]
    paths = [c if isinstance(c, str) else c["class_path"] for c in defaults]
    kept = [c["class_path"] for c in config["trainer"]["callbacks"]]
    assert config["trainer"]["logger"] is False and config["last_checkpoint"]["every_n_steps"] == 0
    assert "app.pictures.callback.ValidationPictures" not in kept and len(kept) == len(paths) - 1
    assert "lightning.pytorch.callbacks.TQDMProgressBar" in kept


def test_the_machine_names_its_kernel_and_survives_a_missing_git(monkeypatch):
    assert machine(dry=True)["kernel"] == platform.release()
    monkeypatch.setattr(gpu_check.shutil, "which", lambda name: None)
    assert machine(dry=True)["commit"] is None


def test_a_part_that_fails_or_runs_out_of_time_is_reported_and_the_next_one_runs(tmp_path):
    def fails(check: Check, rows: list) -> None:
        check.child(["-c", "import sys; print('the end of its output'); sys.exit(3)"])

    def hangs(check: Check, rows: list) -> None:
        rows.append(("measured before the limit", {"img/s": 12.5}))
        check.child(["-c", "import time; print('still waiting', flush=True); time.sleep(120)"])

    def measures(check: Check, rows: list) -> None:
        _, output = check.child(["-c", "print(2 + 2)"])
        rows.append(("a row", {"sum": int(output)}))

    parts = [("fails", fails, 60), ("hangs", hangs, 2), ("measures", measures, 60)]
    check = Check(dry=True, root=tmp_path, work=tmp_path)
    run(check, parts, tmp_path)

    record = json.loads((tmp_path / "gpu-check.json").read_text())
    failed, hung, ran = record["parts"]
    assert failed["status"].startswith("failed: -c ") and failed["status"].endswith(
        " exited 3: the end of its output"
    )
    assert failed["log_tail"] == "the end of its output" and failed["rows"] == []
    assert hung["status"] == "timeout after 2 s" and hung["seconds"] < 10  # the child was killed at the limit
    assert hung["rows"] == [{"row": "measured before the limit", "figures": {"img/s": 12.5}}]
    assert hung["log_tail"] == "still waiting"  # what the stopped child had printed
    assert ran["status"] == "ok" and ran["rows"] == [{"row": "a row", "figures": {"sum": 4}}]
    table = (tmp_path / "gpu-check.md").read_text()
    assert "| hangs | measured before the limit | img/s 12.5 | timeout after 2 s |" in table


def test_a_torch_older_than_the_project_needs_is_named(monkeypatch):
    assert torch_below_floor() is None  # this venv's torch meets pyproject.toml
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")  # the GPU image's of 2026-11 meets it
    assert torch_below_floor() is None
    monkeypatch.setattr(torch, "__version__", "2.5.1+cu124")
    floor = torch_below_floor()
    assert floor.startswith("torch>=") and floor != "torch>=2.5.1"


def test_rounds_interleave_the_sides():
    assert interleaved(["loop", "template", "off"], 3) == [
        ["loop", "template", "off"],
        ["off", "template", "loop"],
        ["loop", "template", "off"],
    ]


def test_a_sides_line_has_its_median_ratio_with_each_rounds_extremes_and_its_compile_counts(tmp_path):
    def record(img_per_s: float, compiled: int = 0) -> dict:
        counts = {"frames compiled": compiled, "graph breaks": 0, "cudagraph skips": compiled - 1}
        return {"img_per_s": img_per_s, "train_seconds": [9.0, 2.5, 2.5], "compile": counts}

    measured = {
        "loop": [record(100.0), record(120.0), record(110.0)],
        "graphed": [record(150.0, 1), record(132.0, 2), record(220.0, 1)],
    }
    check = Check(dry=True, root=tmp_path, work=tmp_path)
    (_, loop), (label, graphed) = ratio_rows(check, MNIST, measured)
    assert label == "MnistCNN, batch 128, 32-true: graphed" and "/ ref" not in loop
    assert graphed["img/s"] == 150 and graphed["/ ref"] == pytest.approx(150 / 110)
    assert (graphed["min"], graphed["max"]) == (pytest.approx(1.1), pytest.approx(2.0))
    assert graphed["timed s, least"] == 5.0 and graphed["rounds"] == 3
    assert (graphed["frames compiled"], graphed["cudagraph skips"]) == (2, 1)  # the most of any round
    assert "frames compiled" not in loop  # nothing compiled there
    assert check.medians[MNIST.label, "graphed"] == 150
