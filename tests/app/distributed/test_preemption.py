"""Preemption under DDP: a SIGTERM to the launcher or to one rank of a 2-process gloo job.

Every rank stops at the same step, ``last.ckpt`` is written once, one resume line, exit status 143,
each resume starts from the checkpoint's step and weights, and ``--ckpt_path last`` ends with the weights
of the uninterrupted job (that last resume under ddp only).
"""

import os
import time
from pathlib import Path

import pytest
import torch
from helpers.cli import callback, check, load_probe, max_difference, probe, run_folder, run_process

pytestmark = [pytest.mark.distributed, pytest.mark.full]

# 512 training samples at batch 32 on each of 2 ranks, 4 steps an epoch: 8 in all.
JOB = [
    "--trainer.accelerator=cpu",
    "--trainer.devices=2",
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=4",
    "--data.batch_size=32",
    "--test_after_fit=false",
    "--last_checkpoint.every_n_steps=0",  # no periodic saves: the stop's own save stands out
]


@pytest.fixture(scope="module")
def whole(mnist_root, tmp_path_factory) -> dict:
    """The uninterrupted job's final weights."""
    cwd = tmp_path_factory.mktemp("whole")
    check(run_process("fit", *JOB, f"--data.root={mnist_root}", probe(cwd / "probe"), cwd=cwd))
    return load_probe(cwd / "probe", "end", 0)


def gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def stopped_job(job: list[str], cwd: Path, log: Path, step: int, launcher: bool) -> int:
    """Runs ``job`` with a SIGTERM after ``step`` steps, to rank 1 or to the launcher; checks the
    stop and returns the step at which every rank stopped."""
    stop = callback("helpers.preemption.SigtermTo", step=step, rank=1, launcher=launcher)
    saves = callback("helpers.preemption.SaveLog", folder=str(log))
    result = run_process("fit", *job, stop, saves, cwd=cwd, timeout=180)
    assert result.returncode == 143, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("stopped by SIGTERM: saved ")]
    assert len(lines) == 1, result.stderr[-3000:]
    assert "resume with: python -m app fit " in lines[0] and lines[0].endswith(" --ckpt_path last")
    assert "Traceback" not in result.stderr
    assert all(gone(int((log / f"pid-rank{rank}").read_text())) for rank in (0, 1))
    # The ranks took part in the same saves; the last, the stop's, once, at the same step.
    saves = [(log / f"saves-rank{rank}").read_text().split() for rank in (0, 1)]
    assert saves[0] == saves[1] and saves[0].count(saves[0][-1]) == 1, saves
    last = run_folder(cwd) / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == int(saves[0][-1])
    return int(saves[0][-1])


@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_sigterm_to_the_launcher_or_one_rank_stops_all_at_one_step_and_resumes_exactly(
    strategy, whole, mnist_root, tmp_path
):
    job = [*JOB, f"--trainer.strategy={strategy}", f"--data.root={mnist_root}"]
    # As SLURM sends it, mid-epoch 0: the ranks agree one step later (rank 0 may take a step more
    # before it sees it), never alone.
    first = stopped_job(job, tmp_path, tmp_path / "log1", step=2, launcher=True)
    assert first in (3, 4)
    saved = torch.load(run_folder(tmp_path) / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    # Resumed from there on every rank, then to rank 1 alone mid-epoch 1: the next step ends on every
    # rank, and they stop.
    resumed = [*job, "--ckpt_path=last"]
    probed = [*resumed, probe(tmp_path / "resumed")]
    assert stopped_job(probed, tmp_path, tmp_path / "log2", step=6, launcher=False) == 7
    for rank in (0, 1):
        start = load_probe(tmp_path / "resumed", "start", rank)
        assert start["global_step"] == first and max_difference(start["weights"], saved) == 0, rank
    if strategy == "ddp_spawn":
        return  # the resume to the end is ddp's: from the weights a checkpoint holds, both train alike
    check(run_process("fit", *resumed, probe(tmp_path / "probe"), cwd=tmp_path))
    for rank in (0, 1):
        end = load_probe(tmp_path / "probe", "end", rank)
        assert end["global_step"] == 8
        assert max_difference(end["weights"], whole["weights"]) == 0, rank
