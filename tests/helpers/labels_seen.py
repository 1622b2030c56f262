"""A callback that records what training was fed, added from the command line."""

import json
from pathlib import Path

from lightning import Callback, LightningModule, Trainer


class LabelsSeen(Callback):
    """Writes ``FILE`` when training ends: the labels of each epoch's training batches, one list an epoch.

    Args:
        file: the JSON file written.
    """

    def __init__(self, file: str) -> None:
        self.file, self.epochs = Path(file), []

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.epochs.append([])

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, *_) -> None:
        self.epochs[-1].extend(batch[1].tolist())

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.file.write_text(json.dumps(self.epochs))
