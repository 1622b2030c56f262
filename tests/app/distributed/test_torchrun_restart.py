"""A worker lost mid-training under ``torchrun --max-restarts``: the restarted group resumes the same run.

torchrun shares its rendezvous store with the workers, and a restarted group reads the previous
attempt's addresses there (pytorch issues 135712, 167288); ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``
with the c10d rendezvous avoids it, so ``scripts/torchrun.sh`` and the Docker image set it.
"""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import ROOT, Result, app_args, app_env, callback, check, free_port, load_probe, probe

pytestmark = [pytest.mark.distributed, pytest.mark.full]
RESTART_SAFE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"


def run_group(command: list[str], cwd: Path, timeout: int) -> Result:
    """Run ``command`` in a process group of its own, all of it killed on a timeout.

    A timeout kills torchrun with SIGKILL, which leaves its workers running: hence the group.
    """
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    with subprocess.Popen(command, cwd=cwd, env=app_env(), **pipes) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            pytest.fail(f"torchrun still ran after {timeout} s:\n{err[-3000:]}")
    return Result(process.returncode, out, err)


def test_a_killed_worker_is_restarted_and_resumes_its_run(mnist_root, tmp_path, monkeypatch):
    """``scripts/torchrun.sh`` as a node runs it, with 2 CPU processes and one restart."""
    monkeypatch.setenv(
        "PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )  # its torchrun
    for name, value in {"NPROC": "2", "RESTARTS": "1", "RDZV": f"127.0.0.1:{free_port()}"}.items():
        monkeypatch.setenv(name, value)
    # 2 epochs of 4 steps; rank 1 dies after step 7, so the restart resumes last.ckpt of step 6, mid-epoch.
    args = ["--trainer.accelerator=cpu"]
    args += ["--trainer.max_epochs=2", "--data.batch_size=32", "--last_checkpoint.every_n_steps=2"]
    args += [f"--data.root={mnist_root}", "--test_after_fit=false", probe(tmp_path / "probe")]
    args += [callback("helpers.stops.KillAt", step=7, rank=1)]
    result = run_group(
        [str(ROOT / "scripts" / "torchrun.sh"), *app_args("fit", *args)[1:]], tmp_path, timeout=240
    )
    check(result)
    output = result.stdout + result.stderr
    resumed = re.findall(r"resuming from (\S+)", output)
    assert resumed == ["runs/MNIST-MnistCNN/version_0/checkpoints/last.ckpt"], output[-3000:]
    assert load_probe(tmp_path / "probe", "start", 0)["global_step"] == 6
    assert load_probe(tmp_path / "probe", "end", 0)["global_step"] == 8  # where an uninterrupted run ends
    assert [run.name for run in (tmp_path / "runs").glob("*/version_*")] == ["version_0"]


def test_the_docker_image_is_restart_safe_under_torchrun():
    """The image's torchrun entrypoint (README, "Docker") restarts with the variable set."""
    assert RESTART_SAFE in (ROOT / "Dockerfile").read_text()
