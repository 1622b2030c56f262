"""Stop at the first step whose training loss is NaN or infinite, before it is checkpointed."""

from pathlib import Path

import torch
from lightning import Callback, LightningModule, Trainer


class LossNotFiniteError(Exception):
    """The training loss diverged; the message gives the step and the last good checkpoint."""


class FiniteLoss(Callback):
    """Raises :class:`LossNotFiniteError` on every rank at the first non-finite training loss.

    Runs before the callbacks that save checkpoints (the CLI puts it first, Lightning moves its
    ModelCheckpoints last), so the checkpoints on disk stay the last good ones. The ranks agree
    through one all-reduce per step, so none is left waiting.
    """

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx):
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        finite = loss is None or bool(torch.isfinite(loss.detach()).all())
        if trainer.strategy.reduce_boolean_decision(finite, all=True):
            return
        value = "not finite on another rank" if finite else f"{loss.item()}"
        kept = next((p for p in Path(trainer.default_root_dir).glob("checkpoints/last.ckpt")), None)
        raise LossNotFiniteError(
            f"the training loss is {value} at step {trainer.global_step} (epoch {trainer.current_epoch}); "
            + (f"the last good checkpoint is {kept}" if kept else "no checkpoint was saved before it")
            + "; lower --model.lr (or check the data) and resume with --ckpt_path last"
        )
