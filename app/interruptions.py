"""SIGTERM (a scheduler's pre-emption, ``kill``): save a checkpoint and stop."""

from pathlib import Path

from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException


class CheckpointOnSigterm(Callback):
    """Saves ``last.ckpt`` when Lightning stops training for a SIGTERM, and only then.

    Lightning turns SIGTERM into an exception raised on all ranks at the same step (the ranks agree
    through a broadcast), so the save's collectives meet. Other exceptions (a NaN loss, a crash)
    save nothing, unlike Lightning's OnExceptionCheckpoint: the files on disk stay the last good ones.
    """

    def __init__(self, folder: str) -> None:
        self.path = Path(folder) / "last.ckpt"

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        if isinstance(exception, SIGTERMException) and trainer.state.fn == "fit":
            trainer.save_checkpoint(self.path)
