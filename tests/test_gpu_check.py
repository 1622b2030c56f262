"""The GPU check (``make gpu-check``): its dry run, every part for real on CPU at tiny sizes, so that
the script is ready the day a GPU is lent; and how it reports a part that fails or runs out of time."""

import json
import math
import subprocess
import sys

import pytest
import torch
from helpers.cli import ROOT

from benchmarks.gpu_check import run
from benchmarks.gpu_parts import PARTS, Check, torch_below_floor


# Starts a child process per run of the check, one after the other; among the long tests.
@pytest.mark.full
@pytest.mark.distributed
def test_the_dry_run_measures_every_part_and_writes_the_table_and_the_json(tmp_path):
    out = tmp_path / "out"
    command = ["make", "--no-print-directory", "gpu-check", "DRY=1", f"OUT={out}", f"PYTHON={sys.executable}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    record = json.loads((out / "gpu-check.json").read_text())
    assert record["machine"]["torch"] == torch.__version__ and record["machine"]["mode"].startswith("dry")
    parts = {part["part"]: part for part in record["parts"]}
    assert list(parts) == [title for _, title, _, _ in PARTS]
    for title, part in parts.items():
        if title == "pytest -m gpu" and not torch.cuda.is_available():
            assert part["status"] == "skipped: no CUDA", part
        else:
            assert part["status"] == "ok", part
        assert part["rows"] and part["seconds"] > 0, part
        for row in part["rows"]:
            figures = row["figures"].values()
            assert figures and all(isinstance(v, int | float) and math.isfinite(v) for v in figures), row

    # One progress line per part, in order; the table has a line for each row.
    progress = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert [line.split("] ", 1)[1].split(": ")[0] for line in progress] == list(parts)
    table = (out / "gpu-check.md").read_text()
    for part in parts.values():
        for row in part["rows"]:
            assert f"| {row['row']} |" in table
    lines = [line for line in table.splitlines() if line.startswith("|")]
    assert len(lines) == 2 + sum(len(part["rows"]) for part in parts.values())  # header, rule, rows


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
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")  # the GPU image's of 2026-11
    floor = torch_below_floor()
    assert floor.startswith("torch>=") and floor != "torch>=2.11.0"
