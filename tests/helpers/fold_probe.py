"""A callback the fold tests add from the command line: what each rank validates on."""

from pathlib import Path

import torch
from lightning import Callback, LightningModule, Trainer


class FoldProbe(Callback):
    """Saves, per rank, ``rank{R}.pt``: the DataModule's train and validation indices, this rank's share
    of the validation set, and each sample it validated as ``(label, sum of its pixels)``.

    Args:
        folder: where the files go.
    """

    def __init__(self, folder: str) -> None:
        self.folder, self.seen = Path(folder), []

    def on_validation_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, *_) -> None:
        if not trainer.sanity_checking:
            images, labels = batch[0], batch[1]
            sums = images.double().flatten(1).sum(1)
            self.seen += [(int(y), round(float(s), 4)) for y, s in zip(labels, sums, strict=True)]

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking:
            return
        data = trainer.datamodule
        share = [data.val_set.indices[i] for i in trainer.val_dataloaders.sampler]
        record = {
            "train": list(data.train_set.indices),
            "val": list(data.val_set.indices),
            "share": share,
            "seen": self.seen,
            "world_size": trainer.world_size,
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        torch.save(record, self.folder / f"rank{trainer.global_rank}.pt")
