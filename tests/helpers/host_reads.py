"""A callback that writes down at which training batches a tensor's value was read on the host."""

import json
from pathlib import Path

import torch
from lightning import Callback, LightningModule, Trainer

# The Tensor methods that copy a value to the host: on a GPU, each waits for the queued work.
READS = ("item", "tolist", "__bool__", "__float__", "__int__")


class HostReads(Callback):
    """Writes ``FILE``: for each training batch index that read a tensor's value, the methods that read,
    one name a read.

    The reads are counted from one ``on_train_batch_start`` to the next, so a batch's count holds
    everything Lightning, the model and the callbacks did for it, logging included.

    Args:
        file: the JSON file written when fit ends.
    """

    def __init__(self, file: str) -> None:
        self.file, self.batch, self.reads = Path(file), None, {}
        self.originals = {name: getattr(torch.Tensor, name) for name in READS}

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        for name, original in self.originals.items():
            setattr(torch.Tensor, name, self._counting(name, original))

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, batch_idx: int):
        self.batch = batch_idx

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.file.write_text(json.dumps(self.reads))

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        for name, original in self.originals.items():
            setattr(torch.Tensor, name, original)

    def _counting(self, name: str, original):
        def read(tensor, *args, **kwargs):
            if self.batch is not None:
                self.reads.setdefault(self.batch, []).append(name)
            return original(tensor, *args, **kwargs)

        return read
