"""When the process that launched the other ddp ranks fails, they must not outlive it."""

import signal

from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException


class StopRanksOnError(Callback):
    """Kills the ranks that Lightning's ddp launcher started when the launching process (rank 0) fails.

    Lightning kills them only on Ctrl-C. After any other exception rank 0 exits and a rank that is not
    waiting in a collective at that moment (hung, or busy between two) would run on as an orphan,
    holding the job's terminal or log pipe open forever. A failing child rank needs nothing: Lightning
    watches the children and kills every rank when one exits with an error. SIGTERM is left alone:
    every rank stops at the same step and they save a checkpoint together.
    """

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        launcher = trainer.strategy.launcher
        if not isinstance(exception, SIGTERMException) and getattr(launcher, "procs", None):
            launcher.kill(signal.SIGKILL)
