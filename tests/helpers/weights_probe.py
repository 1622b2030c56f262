"""A callback the distributed tests add from the command line to see inside every rank."""

from pathlib import Path

import torch
from lightning import Callback, LightningModule, Trainer


class WeightsProbe(Callback):
    """Saves each rank's weights and step count at the start and the end of training.

    Args:
        folder: where ``{start,end}-rank{R}.pt`` files go.
        epochs: also at each epoch end, ``epoch{E}-rank{R}.pt``.
        steps: also after each training step, ``step{S}-rank{R}.pt``.
    """

    def __init__(self, folder: str, epochs: bool = False, steps: bool = False) -> None:
        self.folder, self.epochs, self.steps = Path(folder), epochs, steps

    def _save(self, trainer: Trainer, module: LightningModule, moment: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        weights = {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}
        record = {"weights": weights, "global_step": trainer.global_step, "world_size": trainer.world_size}
        torch.save(record, self.folder / f"{moment}-rank{trainer.global_rank}.pt")

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save(trainer, pl_module, "start")

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save(trainer, pl_module, "end")

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *_) -> None:
        if self.steps:
            self._save(trainer, pl_module, f"step{trainer.global_step}")

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.epochs:
            self._save(trainer, pl_module, f"epoch{trainer.current_epoch}")
