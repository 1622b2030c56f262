"""Every rank of a job ends with it, and ends cleanly."""

import atexit
import signal

import torch.distributed as dist
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException


class EndRanksTogether(Callback):
    """Kills the ranks Lightning launched when rank 0 fails; every rank leaves its process group at exit.

    Lightning kills the ranks it launched only on Ctrl-C. After any other exception rank 0 exits and
    a rank not waiting in a collective at that moment (hung, or busy between two) would run on as an
    orphan, holding the job's terminal or log pipe open. A failing child rank needs nothing: Lightning
    kills every rank when one exits with an error. SIGTERM is left alone: every rank stops at the same
    step and they save a checkpoint together.

    Lightning destroys the process group at exit for NCCL only; a gloo group left to the interpreter's
    shutdown can abort its rank ("terminate called without an active exception", pytorch issue 190489).
    """

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        # Here, not on import: this runs in every rank, spawned ones too, once the Trainer runs.
        atexit.unregister(_leave_process_group)
        atexit.register(_leave_process_group)

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        launcher = trainer.strategy.launcher
        if not isinstance(exception, SIGTERMException) and getattr(launcher, "procs", None):
            launcher.kill(signal.SIGKILL)


def _leave_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
