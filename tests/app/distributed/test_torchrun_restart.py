"""A worker lost mid-training under ``torchrun --max-restarts``: the restarted group resumes the same run.

torchrun shares its rendezvous store with the workers, and a restarted group reads the previous
attempt's addresses there (pytorch issues 135712, 167288); ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``
with the c10d rendezvous avoids it, so the README's command and the Docker image set it.
"""

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from helpers.cli import ROOT, Result, app_command, app_env, callback, check, free_port, load_probe, probe

pytestmark = pytest.mark.distributed
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
    monkeypatch.setenv(*RESTART_SAFE.split("="))
    launcher = ("-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2", "--max-restarts=1")
    launcher += ("--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}")
    # 2 epochs of 4 steps; rank 1 dies after step 7, so the restart resumes last.ckpt of step 6, mid-epoch.
    args = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp", "--ckpt_path=last"]
    args += ["--trainer.max_epochs=2", "--data.batch_size=32", "--last_checkpoint.every_n_steps=2"]
    args += [f"--data.root={mnist_root}", "--test_after_fit=false", probe(tmp_path / "probe")]
    args += [callback("helpers.stops.KillAt", step=7, rank=1)]
    result = run_group(app_command("fit", *args, launcher=launcher), tmp_path, timeout=240)
    check(result)
    output = result.stdout + result.stderr
    resumed = re.findall(r"resuming from (\S+)", output)
    assert resumed == ["runs/MNIST-MnistCNN/version_0/checkpoints/last.ckpt"], output[-3000:]
    assert load_probe(tmp_path / "probe", "start", 0)["global_step"] == 6
    assert load_probe(tmp_path / "probe", "end", 0)["global_step"] == 8  # where an uninterrupted run ends
    assert [run.name for run in (tmp_path / "runs").glob("*/version_*")] == ["version_0"]


def test_the_documented_torchrun_command_survives_restarts():
    readme = (ROOT / "README.md").read_text()
    blocks = [re.sub(r"\\\n\s*", " ", block) for block in re.findall(r"```bash\n(.*?)```", readme, re.S)]
    lines = [line for block in blocks for line in block.splitlines() if not line.lstrip().startswith("#")]
    commands = [line for line in lines if re.search(r"\btorchrun ", line)]
    assert commands
    for command in commands:
        for part in ("--max-restarts", "--rdzv-backend c10d", "--ckpt_path last"):
            assert part in command, command
        # The Docker section runs torchrun as the image's entrypoint: the image sets the variable.
        setting = (ROOT / "Dockerfile").read_text() if command.startswith("docker run") else command
        assert RESTART_SAFE in setting, command
    assert any(command.startswith("docker run") for command in commands)
