"""A one-node SLURM cluster on 127.0.0.1 for tests: Debian's slurm-wlm and munge, started as root in a
folder of their own (config, state, logs, munge socket), stopped afterwards."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from helpers.cli import free_port

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "scontrol", "scancel", "squeue", "srun")


def missing() -> str | None:
    """Why a cluster cannot start here, or None."""
    if os.geteuid() != 0:
        return "slurmd starts job processes as their user: it must run as root"
    absent = [
        name
        for name in (*DAEMONS, *CLIENTS)
        if shutil.which(name, path=f"/usr/sbin:{os.environ['PATH']}") is None
    ]
    if absent:
        return f"{', '.join(absent)} missing: apt install slurm-wlm munge"
    return None


class Cluster:
    """munged, slurmctld and slurmd for one node named ``localhost`` with ``cpus`` CPUs."""

    def __init__(self, folder: Path, cpus: int = 2) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        for sub in ("state", "spool"):
            (folder / sub).mkdir(exist_ok=True)
        ctld = slurmd = free_port()
        while slurmd == ctld:
            slurmd = free_port()
        # Lightning's rendezvous port is 15000 + the job id's last 4 digits: the clusters of parallel test
        # workers number their jobs 1000 apart, so that their jobs never share a port.
        first_job = 1 + 1000 * int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
        self.socket = folder / "munge.socket"
        self.conf = folder / "slurm.conf"
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=tests",
                    "SlurmctldHost=localhost(127.0.0.1)",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    f"SlurmctldPort={ctld}",
                    f"SlurmdPort={slurmd}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    # cred_expire: also how long a requeued job waits before it may start again (120 s).
                    f"AuthInfo=socket={self.socket},cred_expire=10",
                    f"StateSaveLocation={folder / 'state'}",
                    f"SlurmdSpoolDir={folder / 'spool'}",
                    f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
                    f"SlurmdPidFile={folder / 'slurmd.pid'}",
                    f"SlurmctldLogFile={folder / 'slurmctld.log'}",
                    f"SlurmdLogFile={folder / 'slurmd.log'}",
                    "SlurmdParameters=config_overrides",  # the node as configured, whatever this machine has
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_CPU",
                    "SchedulerType=sched/builtin",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "KillWait=5",
                    "MinJobAge=600",
                    f"FirstJobId={first_job}",
                    f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN",
                    "PartitionName=tests Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.processes: list[subprocess.Popen] = []

    def start(self, timeout: float = 60) -> None:
        key = self.folder / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        f = self.folder
        self._daemon(
            "munged",
            "--foreground",
            "--force",
            f"--socket={self.socket}",
            f"--key-file={key}",
            f"--pid-file={f / 'munged.pid'}",
            f"--log-file={f / 'munged.log'}",
            f"--seed-file={f / 'munged.seed'}",
        )
        self._wait(self.socket.exists, timeout, "munged")
        self._daemon("slurmctld", "-D", "-i", "-f", str(self.conf))
        self._daemon("slurmd", "-D", "-N", "localhost", "-f", str(self.conf))
        self._wait(self._node_idle, timeout, "slurmd (node localhost never idle)")

    def _daemon(self, name: str, *args: str) -> None:
        log = open(self.folder / f"{name}.out", "wb")  # noqa: SIM115
        command = [shutil.which(name, path=f"/usr/sbin:{os.environ['PATH']}"), *args]
        self.processes.append(subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def _node_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout
        return out.strip().startswith("idle")

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            for p in self.processes:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}: {self.logs()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not ready after {timeout} s: {self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.folder.glob("*.log")) + sorted(self.folder.glob("*.out"))
        )

    def run(self, *command: str, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run(command, env=self.env, cwd=cwd, capture_output=True, text=True, timeout=60)
        if check and result.returncode:
            raise RuntimeError(f"{' '.join(command)}: {result.returncode} {result.stderr}")
        return result

    def stop(self) -> None:
        """Cancel the jobs left (a failed test's), so that no task outlives the daemons, then stop them."""
        if all(p.poll() is None for p in self.processes):
            jobs = self.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
            if jobs:
                self.run("scancel", "--signal=KILL", "--full", *jobs, check=False)
                self.run("scancel", *jobs, check=False)
                deadline = time.monotonic() + 60
                while self.run("squeue", "-h", check=False).stdout.strip() and time.monotonic() < deadline:
                    time.sleep(0.5)
        for p in reversed(self.processes):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
