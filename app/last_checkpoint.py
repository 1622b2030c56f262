"""``last.ckpt``: the newest state of a run, kept current so a kill or a pre-emption loses little."""

from pathlib import Path

from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException


class LastCheckpoint(Callback):
    """Saves ``FOLDER/last.ckpt`` every ``every_n_steps`` training steps, at every epoch end, and
    when Lightning stops training for a SIGTERM.

    Lightning's ``ModelCheckpoint(save_last=True)`` rewrites ``last.ckpt`` at an epoch end only when
    a best-k checkpoint was saved there, and its OnExceptionCheckpoint saves on any exception (a NaN
    loss too). Lightning turns SIGTERM into an exception raised on all ranks at the same step (they
    agree through a broadcast), so the save's collectives meet; other exceptions save nothing and
    the files on disk stay the last good ones.

    Args:
        folder: the run's checkpoint folder.
        every_n_steps: steps between saves; 0 saves at epoch ends (and on SIGTERM) only.
    """

    def __init__(self, folder: str, every_n_steps: int) -> None:
        self.path, self.every_n_steps = Path(folder) / "last.ckpt", every_n_steps
        self.saved_at = -1

    def save(self, trainer: Trainer) -> None:
        if trainer.sanity_checking or trainer.global_step == self.saved_at:
            return
        trainer.save_checkpoint(self.path)
        self.saved_at = trainer.global_step

    def on_train_batch_end(self, trainer: Trainer, *_) -> None:
        if self.every_n_steps > 0 and trainer.global_step % self.every_n_steps == 0:
            self.save(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.save(trainer)

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        if isinstance(exception, SIGTERMException) and trainer.state.fn == "fit":
            self.save(trainer)
