"""The soak test of the faults: 30 random faults over one long fit, each resumed with ``--ckpt_path last``;
the run ends with exactly the weights of an uninterrupted one.

Slow (about 12 min on 2 cores): ``.venv/bin/python -m pytest -m slow tests/app/test_fault_soak.py``.
"""

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from helpers.cli import (
    app_command,
    app_env,
    callback,
    check,
    load_probe,
    max_difference,
    one_error_line,
    probe,
    run_app,
    run_folder,
    run_process,
    small_disk,
)
from helpers.data_files import write_image_folder

from app.runs.checkpoints import intact

IMAGE_FOLDER = ["--data=ImageFolderDataModule", "--data.loader=torch", "--data.batch_size=4"]

pytestmark = [pytest.mark.slow, pytest.mark.distributed]  # processes started and killed, for minutes

FAULTS = 30
KINDS = ["worker killed", "SIGTERM", "SIGKILL", "disk full"]
SECONDS_PER_STEP = 0.1


def test_thirty_random_faults_over_one_fit_end_with_the_uninterrupted_weights(tmp_path):
    root = write_image_folder(tmp_path / "images", per_class=12)  # 8 steps an epoch
    started = tmp_path / "started"
    slow = callback("helpers.stops.SlowSteps", seconds=SECONDS_PER_STEP, started=str(started))
    args = [*IMAGE_FOLDER, f"--data.root={root}", "--data.num_workers=1", "--test_after_fit=false"]
    args += [
        "--trainer.limit_train_batches=1.0",
        "--trainer.max_epochs=40",
        "--last_checkpoint.every_n_steps=2",
    ]
    args.append(slow)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    check(run_app("fit", *args, probe(whole / "probe"), cwd=whole))
    # Below a checkpoint's size, above what else a session writes (its metrics, config.yaml).
    limit = (run_folder(whole) / "checkpoints" / "last.ckpt").stat().st_size // 2
    cut.mkdir()
    moments = random.Random(44)
    done = {kind: 0 for kind in KINDS}
    history: list[str] = []
    for _ in range(FAULTS):
        kind = moments.choice(KINDS)
        started.unlink(missing_ok=True)
        process = subprocess.Popen(
            app_command("fit", *args, "--ckpt_path=last"),
            cwd=cut,
            env=app_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=small_disk(limit) if kind == "disk full" else None,
        )
        if kind != "disk full":  # that one fails at its first save
            strike(kind, process, started, moments.uniform(0, 1.5))
        _, stderr = process.communicate(timeout=300)
        expected = {"SIGTERM": 143, "SIGKILL": -signal.SIGKILL}.get(kind, 1)
        assert process.returncode == expected, (kind, stderr[-3000:])
        if kind == "worker killed":
            assert one_error_line(stderr).startswith("error: a DataLoader worker process died, ")
        if kind == "disk full":
            assert one_error_line(stderr).startswith("error: no room for checkpoint ")
        for path in cut.glob("runs/*/*/checkpoints/*.ckpt"):
            assert intact(path), (kind, path)
        done[kind] += 1
        last = next(cut.glob("runs/*/*/checkpoints/last.ckpt"), None)
        saved = torch.load(last, weights_only=True) if last else {}
        # What each session left, for the report of a failure: where the next one resumes.
        history.append(f"{kind}: last.ckpt at epoch {saved.get('epoch')} step {saved.get('global_step')}")
    check(run_process("fit", *args, probe(cut / "probe"), "--ckpt_path=last", cwd=cut, timeout=600))
    assert [p.name for p in cut.glob("runs/*/*")] == ["version_0"]
    ends = [load_probe(folder / "probe", "end", 0) for folder in (whole, cut)]
    assert ends[0]["global_step"] == ends[1]["global_step"], (done, history)
    assert max_difference(ends[0]["weights"], ends[1]["weights"]) == 0, (done, history)


def strike(kind: str, process: subprocess.Popen, started: Path, delay: float) -> None:
    """``kind`` of fault to ``process``, ``delay`` seconds into its training."""
    deadline = time.monotonic() + 300
    while not started.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-3000:]
        time.sleep(0.05)
    time.sleep(delay)
    assert process.poll() is None, "the run ended before its fault: make it longer"
    if kind != "worker killed":
        process.send_signal(signal.SIGTERM if kind == "SIGTERM" else signal.SIGKILL)
        return
    # Between two epochs the training loader's worker may be gone and the next not yet started.
    while not (workers := Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-3000:]
        time.sleep(0.01)
    os.kill(int(workers[0]), signal.SIGKILL)
