"""Stop training after a NaN or infinite loss, before any checkpoint holds the spoiled weights."""

from typing import Any

import torch
from jsonargparse.typing import PositiveInt
from lightning import Callback, LightningModule, Trainer

from app.errors import LossNotFiniteError
from app.runs.checkpoints import last_of
from models import is_log_step

NONE = 2**62  # the step recorded while every loss has been finite


class StopOnNonFiniteLoss(Callback):
    """Raises :class:`LossNotFiniteError` on every rank once a training loss was not finite.

    The first bad step and its loss are recorded on the device at every step, without waiting for
    it; they are read (one all-reduce) at the steps Lightning logs, at each epoch end, and whenever
    a checkpoint is about to be written, whoever writes it, so no file on disk ever holds a bad
    step. Reading at every step would stall the CPU on each GPU step.

    Args:
        check_every_n_steps: steps between reads; None: Lightning's ``log_every_n_steps``.
    """

    def __init__(self, check_every_n_steps: PositiveInt | None = None) -> None:
        self.every = check_every_n_steps
        self.first_bad: torch.Tensor | None = None  # the step after which the loss was bad, or NONE
        self.bad_loss: torch.Tensor | None = None

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, batch_idx) -> None:
        if is_log_step(trainer, self.every):
            self.check(trainer)

    def on_before_backward(self, trainer: Trainer, pl_module: LightningModule, loss: torch.Tensor) -> None:
        # Before any on_train_batch_end, so that no callback can save this step before it is recorded.
        self._record(loss.detach(), trainer.global_step + 1)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.check(trainer)

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]):
        self.check(trainer)

    def _record(self, loss: torch.Tensor, step: int) -> None:
        if self.first_bad is None or self.first_bad.device != loss.device:
            self.first_bad = torch.tensor(NONE, device=loss.device)
            self.bad_loss = torch.zeros((), device=loss.device)
        first = (self.first_bad == NONE) & ~torch.isfinite(loss).all()
        self.first_bad = torch.where(first, step, self.first_bad)
        self.bad_loss = torch.where(first, loss.float().sum(), self.bad_loss)

    def check(self, trainer: Trainer) -> None:
        """Raise on every rank if any rank saw a bad loss since the start (a collective call)."""
        if self.first_bad is None:
            return
        mine = int(self.first_bad)
        first = int(trainer.strategy.reduce(self.first_bad.clone(), reduce_op="min"))
        if first == NONE:
            return
        value = f"{self.bad_loss.item()}" if mine == first else "not finite on another rank"
        kept = last_of(trainer.default_root_dir)
        raise LossNotFiniteError(
            f"the training loss is {value} at step {first}; "
            + (
                f"the last good checkpoint is {kept}"
                if kept.is_file()
                else "no checkpoint was saved before it"
            )
            + "; lower --model.optimizer.lr (or check the data) and resume with --ckpt_path last"
        )
