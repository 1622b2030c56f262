"""A callback the benchmark adds to template runs: training time per epoch, and the fit's time."""

import json
from pathlib import Path

from lightning import Callback, LightningModule, Trainer

from benchmarks.common import now


class EpochTimer(Callback):
    """Writes the figures of a template run as JSON to ``path`` (rank 0), after its test.

    ``train_seconds`` and ``train_samples`` are per epoch, training steps only; ``fit_seconds`` is
    the whole training loop, validation included (start-up, sanity check and test excluded).

    Args:
        path: the JSON file to write.
    """

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.seconds: list[float] = []
        self.samples: list[int] = []
        self.fit_seconds = 0.0

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.fit_start = now(pl_module.device)

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

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.fit_seconds = now(pl_module.device) - self.fit_start

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.is_global_zero:
            record = {
                "train_seconds": self.seconds,
                "train_samples": self.samples,
                "fit_seconds": self.fit_seconds,
                "test_acc": float(trainer.callback_metrics["test/acc"]),
            }
            self.path.write_text(json.dumps(record))
