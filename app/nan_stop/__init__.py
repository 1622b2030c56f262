"""Optional part: stop training once its weights are not finite, before any checkpoint holds them.

To drop it: ``rm -r app/nan_stop`` and its line in ``app/cli.py`` (its tests skip without it).
"""

from typing import Any

import torch
from lightning import Callback, LightningModule, Trainer

from app.errors import UsageError
from app.runs.checkpoints import last_of
from app.runs.folder import run_folder


class StopOnNonFiniteWeights(Callback):
    """Raises :class:`UsageError` on every rank, at the same step, once a weight is NaN or infinite.

    A NaN or infinite training loss spoils every weight it reaches through the optimizer step, so the
    weights are what is checked: before each checkpoint is written (none holds a spoiled step) and at
    each epoch's end, not at every step (a check waits for the device). Under DDP every rank holds the
    same weights; under sharded strategies the ranks agree by one all-reduce, at a step they all save.

    Args:
        at_epoch_end: check at each epoch's end too, not only when a checkpoint is saved.
    """

    def __init__(self, at_epoch_end: bool = True) -> None:
        self.at_epoch_end = at_epoch_end
        self.checked_at = 0  # the step of the last check that passed

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.at_epoch_end:
            self.check(trainer, pl_module)

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]):
        if trainer.state.fn == "fit":
            self.check(trainer, pl_module)

    def check(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Raise if any weight of any rank is not finite; one read of the device."""
        weights = [p.detach() for p in pl_module.parameters()]
        bad = torch.stack([~torch.isfinite(w).all() for w in weights]).any().float() if weights else None
        if bad is None:
            return
        if trainer.world_size > 1:
            bad = trainer.strategy.reduce(bad, reduce_op="sum")
        if not bad.item():
            self.checked_at = trainer.global_step
            return
        f = last_of(run_folder(trainer))
        kept = f"the last good checkpoint is {f}" if f.is_file() else "no checkpoint was saved before it"
        raise UsageError(
            f"the weights are not finite at step {trainer.global_step} (finite at step {self.checked_at}): "
            f"the training loss went NaN or infinite in between; {kept}; lower --model.optimizer.lr (or "
            "check the data) and resume with --ckpt_path last"
        )
