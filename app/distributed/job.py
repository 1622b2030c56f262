"""The ranks of a job: a short collective timeout once training runs, and an end together."""

import atexit
import signal
import time
from datetime import timedelta

import torch.distributed as dist
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import SIGTERMException

from app import versions
from app.internals import set_collective_timeout

# The first torch whose gloo groups apply a timeout set after they were made (2.8 and older keep the
# one they were made with: pytorch issue 165422).
# workaround: pytorch issue 165422; gone when torch >= 2.9 is the floor
GLOO_TIMEOUT = (2, 9)
GLOO_WAIT = "a rank waits for the others up to the group's own timeout (Lightning's 1800 s)"
# The first torch that frees a process group without the GIL: before, freeing a gloo group while its
# thread frees the last collective's tensors deadlocks (pytorch PR 154976), unless paused first.
# workaround: pytorch pull request 154976; gone when torch >= 2.8 is the floor
GIL_FREE_DESTROY = (2, 8)


class DistributedJob(Callback):
    """How the ranks of a job wait for each other, and end.

    - Once training starts (after the sanity check), a rank waits ``--trainer.collective_timeout`` s
      for the others; before, the group's own (Lightning's: 1800 s) bounds the start (ranks joining).
    - When rank 0 fails (not for a SIGTERM), the ranks Lightning launched are killed: Lightning does so
      only on Ctrl-C, and a rank not in a collective would run on as an orphan.
    - Every rank leaves its process group at exit: Lightning does so for NCCL only, and a gloo group
      left to the interpreter's shutdown can abort its rank (pytorch issue 190489).
    """

    def __init__(self) -> None:
        self.pending: timedelta | None = None  # the timeout to set once training starts

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        # Here, not on import: this runs in every rank, spawned ones too, once the Trainer runs.
        atexit.unregister(leave_process_group)
        atexit.register(leave_process_group)
        # Each run makes its process group anew, before this hook.
        seconds = getattr(trainer, "collective_timeout", None)
        distributed = dist.is_available() and dist.is_initialized()
        self.pending = timedelta(seconds=seconds) if seconds is not None and distributed else None
        gloo = self.pending is not None and stage == "fit" and dist.get_backend() == "gloo"
        if gloo and (needed := versions.needs("torch", GLOO_TIMEOUT)):
            rank_zero_info(f"warning: --trainer.collective_timeout on gloo needs {needed}: {GLOO_WAIT}")

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.pending is not None:
            set_collective_timeout(self.pending)
            self.pending = None

    # workaround: Lightning kills its ranks on Ctrl-C only (2.6); gone when on any failure of rank 0
    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        launcher = trainer.strategy.launcher
        if not isinstance(exception, SIGTERMException) and getattr(launcher, "procs", None):
            launcher.kill(signal.SIGKILL)


# workaround: pytorch issue 190489; gone when a gloo group left to shutdown no longer aborts its rank
def leave_process_group() -> None:
    """Destroy this process's default group, if it has one."""
    if dist.is_available() and dist.is_initialized():
        if dist.get_backend() == "gloo" and versions.needs("torch", GIL_FREE_DESTROY):
            time.sleep(0.2)
        dist.destroy_process_group()
