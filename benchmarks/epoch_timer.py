"""A callback the benchmark adds to template runs: training time per epoch, validation excluded."""

import json
from pathlib import Path

from lightning import Callback, LightningModule, Trainer

from benchmarks.common import now


class EpochTimer(Callback):
    """Writes ``{"train_seconds": [...], "train_samples": [...], "test_acc": x}`` to ``path``.

    Args:
        path: the JSON file to write (rank 0).
    """

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.seconds: list[float] = []
        self.samples: list[int] = []

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.start, self.last, self.count = now(pl_module.device), None, 0

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx
    ) -> None:
        self.last = now(pl_module.device)
        self.count += len(batch[1])

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.seconds.append(self.last - self.start)
        self.samples.append(self.count * trainer.world_size)

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.is_global_zero:
            test_acc = float(trainer.callback_metrics["test/acc"])
            record = {"train_seconds": self.seconds, "train_samples": self.samples, "test_acc": test_acc}
            self.path.write_text(json.dumps(record))
