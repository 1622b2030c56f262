"""Fault injection: SIGKILL ``fit`` at random moments, resume with ``--ckpt_path last`` each time.

3 kills run in CI; the soak test kills 20 times: ``pytest -m slow tests/test_kill_and_resume.py``.
"""

import json
import random
import signal
import subprocess
import time

import pytest
import torch
from helpers.cli import app_command, app_env, check, logged, run_app, run_folder

from app.runs.checkpoints import intact

pytestmark = [pytest.mark.distributed, pytest.mark.full]  # one process after another, killed

# 512 training samples at batch 32: 16 steps an epoch, 0.1 s each; a checkpoint every 3 steps.
STEPS_PER_EPOCH, SECONDS_PER_STEP = 16, 0.1


def args(started, epochs: int) -> list[str]:
    slow = {
        "class_path": "helpers.stops.SlowSteps",
        "init_args": {"seconds": SECONDS_PER_STEP, "started": str(started)},
    }
    return [
        f"--trainer.max_epochs={epochs}",
        "--trainer.limit_train_batches=1.0",
        "--data.batch_size=32",
        "--last_checkpoint.every_n_steps=3",
        f"--trainer.callbacks+={json.dumps(slow)}",
    ]


def every_checkpoint_loads(cwd) -> int:
    paths = list(cwd.glob("runs/*/*/checkpoints/*.ckpt"))
    for path in paths:
        assert intact(path), path
        torch.load(path, weights_only=True)
    return len(paths)


def wait_for(pattern: str, cwd, process, timeout: float = 120) -> None:
    """Until a file matching ``pattern`` exists under ``cwd``, while ``process`` runs."""
    deadline = time.monotonic() + timeout
    while not list(cwd.glob(pattern)):
        assert process.poll() is None and time.monotonic() < deadline, f"no {pattern} under {cwd}"
        time.sleep(0.05)


@pytest.mark.parametrize("kills", [3, pytest.param(20, marks=pytest.mark.slow)])
def test_random_kills_lose_no_steps_and_never_tear_a_checkpoint(kills, mnist_root, tmp_path):
    data = f"--data.root={mnist_root}"
    whole, cut, started = tmp_path / "whole", tmp_path / "cut", tmp_path / "started"
    epochs = max(2, 4 * kills // 5)  # 3 kills: 32 steps, 3.2 s of training
    # Only the killed sessions need processes of their own; the other runs go in-process.
    check(run_app("fit", *args(started, epochs), data, cwd=whole))
    cut.mkdir()
    moments = random.Random(kills)
    # All kill moments together stay shorter than the training, so every session is killed.
    window = 0.9 * epochs * STEPS_PER_EPOCH * SECONDS_PER_STEP / kills
    for kill in range(kills):
        started.unlink(missing_ok=True)
        command = app_command("fit", *args(started, epochs), data, "--ckpt_path=last")
        process = subprocess.Popen(
            command, cwd=cut, env=app_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for(started.name, started.parent, process)
        if kill == 0:  # a loaded machine's slower steps would otherwise let every kill land before one
            wait_for("runs/*/*/checkpoints/last.ckpt", cut, process)
        time.sleep(moments.uniform(0, window))
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL
        every_checkpoint_loads(cut)
    resumed = run_app("fit", *args(started, epochs), data, "--ckpt_path=last", cwd=cut)
    check(resumed)
    assert "--ckpt_path last: resuming from runs/" in resumed.stderr
    every_checkpoint_loads(cut)
    # Every session resumed the one run, and it ends at the step of the uninterrupted run.
    assert [p.name for p in cut.glob("runs/*/*")] == ["version_0"]
    steps = [torch.load(run_folder(c) / "checkpoints" / "last.ckpt")["global_step"] for c in (whole, cut)]
    assert steps == [epochs * STEPS_PER_EPOCH] * 2
    accuracy = [logged(run_folder(c))["test/acc"][-1] for c in (whole, cut)]
    assert abs(accuracy[0] - accuracy[1]) <= 0.1, accuracy
