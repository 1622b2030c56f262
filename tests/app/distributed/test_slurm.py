"""scripts/slurm.sbatch on a real SLURM (Debian's slurm-wlm and munge, one node on 127.0.0.1), submitted
from a fresh clone of the project, as a cloner would: 1 node x 2 CPU tasks, MNIST written to disk."""

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers.cli import ROOT, SHRINK, callback, load_probe, max_difference, probe
from helpers.slurm import Cluster, missing

pytestmark = [pytest.mark.distributed, pytest.mark.full]
CPU_TASKS = ["--nodes=1", "--ntasks-per-node=2", "--gres=none", "--cpus-per-task=1"]
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
ENDED += ("PREEMPTED",)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Cluster:
    why = missing()
    if why:
        pytest.skip(f"no SLURM here: {why}")
    cluster = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A fresh clone of this project's committed tree: no runs/ nor any folder made by hand."""
    folder = tmp_path_factory.mktemp("clone") / "project"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(folder)], check=True)
    return folder


def submit(cluster: Cluster, clone: Path, *args: str) -> int:
    """``sbatch`` of the project's script from ``clone``, its Python the one running the tests."""
    env = {**cluster.env, "PATH": f"{Path(sys.executable).parent}:{cluster.env['PATH']}"}
    env |= {"PYTHONPATH": str(clone / "tests"), "PYTHONWARNINGS": "ignore", "PYTHONFAULTHANDLER": "1"}
    command = ["sbatch", "--parsable", *CPU_TASKS, "scripts/slurm.sbatch", *args]
    result = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip().split(";")[0])


def state(cluster: Cluster, job: int) -> dict[str, str]:
    out = cluster.run("scontrol", "show", "job", "-o", str(job)).stdout
    return dict(field.split("=", 1) for field in out.split() if "=" in field)


def wait_for(ready, timeout: float, what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} after {timeout} s; SLURM's logs:\n{cluster.logs()}")
        time.sleep(0.2)


def ended(cluster: Cluster, job: int, timeout: float = 300) -> dict[str, str]:
    """The job's record once it ended; a job still running after ``timeout`` s fails the test with the
    Python stacks of its tasks (SIGABRT: faulthandler), in its log."""
    deadline = time.monotonic() + timeout
    while (record := state(cluster, job))["JobState"] not in ENDED:
        if time.monotonic() > deadline:
            cluster.run("scancel", "--signal=ABRT", str(job), check=False)
            time.sleep(5)
            cluster.run("scancel", str(job), check=False)
            log = Path(record["StdOut"])
            pytest.fail(
                f"job {job} still {record['JobState']} after {timeout} s:\n{log.read_text()[-12000:]}"
            )
        time.sleep(0.5)
    return record


def job_args(mnist_root: Path, *args: str) -> list[str]:
    return [
        *SHRINK,
        "--trainer.accelerator",
        "cpu",
        f"--data.root={mnist_root}",
        "--test_after_fit=false",
        *args,
    ]


def log_of(record: dict[str, str], cluster: Cluster) -> str:
    """The job's log; a job with none (SLURM could not open it) fails the test with slurmd's log."""
    log = Path(record["StdOut"])
    if not log.is_file():
        pytest.fail(f"job {record['JobId']} {record['JobState']} without its log {log}:\n{cluster.logs()}")
    return log.read_text()


def test_the_script_trains_from_a_fresh_clone_and_a_requeued_job_resumes_its_run(cluster, clone, mnist_root):
    """One job, requeued once its first last.ckpt is saved: run again, it resumes in the same run folder."""
    saves = ["--last_checkpoint.every_n_steps=2", "--trainer.max_epochs=3"]
    slow = callback("helpers.stops.SlowSteps", seconds=0.3, started=str(clone / "started"))
    job = submit(cluster, clone, *job_args(mnist_root, *saves, slow, probe(clone / "probe")))
    runs = clone / "runs"
    wait_for(lambda: any(runs.glob("*/version_0/checkpoints/last.ckpt")), 300, "no last.ckpt", cluster)
    cluster.run("scontrol", "requeue", str(job))
    record = ended(cluster, job)
    log = log_of(record, cluster)
    assert record["JobState"] == "COMPLETED" and record["Restarts"] == "1", log[-3000:]
    assert Path(record["StdOut"]).parent == clone  # in the folder sbatch ran in, there before the job
    attempts = [line for line in log.splitlines() if line.startswith("attempt ")]
    assert [line.split()[:4] for line in attempts] == [
        ["attempt", "1", "of", "job"],
        ["attempt", "2", "of", "job"],
    ]
    # Lightning joined SLURM's 2 tasks instead of launching processes of its own: one job, equal weights.
    assert log.count("Initializing distributed: GLOBAL_RANK") == 2 * 2, log[-3000:]
    end = [load_probe(clone / "probe", "end", rank) for rank in (0, 1)]
    assert end[0]["world_size"] == 2 and max_difference(end[0]["weights"], end[1]["weights"]) == 0
    assert log.index("--ckpt_path last: resuming from runs/") > log.index("attempt 2 "), log[-3000:]
    assert log.count("done: ") == 1 and log.index("done: ") > log.index("attempt 2 ")
    assert "Traceback" not in log
    assert [p.name for p in runs.glob("*/*")] == ["version_0"]
    ckpt = torch.load(next(runs.glob("*/version_0/checkpoints/last.ckpt")), weights_only=True)
    assert ckpt["global_step"] == 3 * 2  # 3 epochs of 2 steps (512 images, 2 x 128 a step): once each
    assert not list(runs.rglob("hpc_ckpt*"))


def test_sigusr1_stops_every_rank_at_one_step_and_the_job_requeues_and_resumes(cluster, clone, mnist_root):
    """SLURM's warning before the time limit (--signal=SIGUSR1@90: to every task of the job's steps, as
    ``scancel --signal=USR1`` sends it): 20 in all, during start-up, training, the stop and the requeue,
    and to the requeued attempt mid-training; every one ends cleanly."""
    cwd = clone / "usr1"
    cwd.mkdir()
    started = cwd / "started"
    slow = callback("helpers.stops.SlowSteps", seconds=0.5, started=str(started))
    shape = ["--data.batch_size=32", "--trainer.max_epochs=3", "--trainer.default_root_dir=usr1/runs"]
    job = submit(cluster, clone, *job_args(mnist_root, *shape, slow))
    record = state(cluster, job)
    log = Path(record["StdOut"])
    rng = random.Random(63)
    sent = []

    def usr1(count: int, gap: float) -> None:
        for _ in range(count):
            result = cluster.run("scancel", "--signal=USR1", str(job), check=False)
            sent.append(result.returncode == 0)
            time.sleep(rng.uniform(0, gap))

    # During start-up: Python importing, the ranks joining (not fatal, and nothing saved).
    wait_for(lambda: log.is_file() and "GLOBAL_RANK" in log.read_text(), 300, "no rank started", cluster)
    usr1(5, 0.3)
    # During training: steps, their agreement, the stop's save, the ranks' way out.
    wait_for(started.exists, 300, "training never started", cluster)
    usr1(14, 0.1)  # within about a second: the stop, its save and the way out, before the requeue
    # SLURM refuses a signal while the job requeues and scancel sends it again later: the burst's last ones
    # may reach the next attempt, which then stops too. However many stops, each must end cleanly.
    wait_for(lambda: state(cluster, job)["Restarts"] != "0", 300, "never requeued", cluster)
    started.unlink(missing_ok=True)
    # The time limit's warning to the requeued attempt, mid-training.
    # (Its 10 or so steps left take 5 s and more: the warning lands before the last.)
    wait_for(started.exists, 300, "the requeued attempt never trained", cluster)
    time.sleep(rng.uniform(0.2, 1.0))
    usr1(1, 0)
    record = ended(cluster, job)
    text = log_of(record, cluster)
    print(f"SIGUSR1 deliveries: {len(sent)} sent, {sum(sent)} accepted by SLURM")
    restarts = int(record["Restarts"])
    assert record["JobState"] == "COMPLETED" and restarts >= 2, text[-5000:]
    assert len(sent) == sum(sent) == 20  # each accepted: sent to a running job's tasks
    assert "#SBATCH --signal=SIGUSR1@90" in (clone / "scripts" / "slurm.sbatch").read_text()  # as it is sent
    attempts = [line.split()[1] for line in text.splitlines() if line.startswith("attempt ")]
    assert attempts == [str(n) for n in range(1, restarts + 2)], text[-5000:]
    assert text.count("requeueing job ") == text.count("stopped by SIGUSR1: saved ") == restarts, text[-5000:]
    assert text.count("done: ") == 1 and "Traceback" not in text and "Handling auto-requeue" not in text
    runs = cwd / "runs"
    assert [p.name for p in runs.glob("*/*")] == ["version_0"]
    assert not list(runs.rglob("hpc_ckpt*"))
    ckpt = torch.load(next(runs.glob("*/version_0/checkpoints/last.ckpt")), weights_only=True)
    assert ckpt["global_step"] == 3 * 4  # as uninterrupted: 3 epochs of 4 steps (512 images, 2 x 32 a step)
