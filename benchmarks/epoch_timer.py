"""A callback the benchmark adds to template runs: training time per epoch, and the fit's time."""

import json
from pathlib import Path

from lightning import Callback, LightningModule, Trainer

from benchmarks.common import EpochClock, now
from benchmarks.internals import compile_counters


class EpochTimer(Callback):
    """Writes the figures of a template run as JSON to ``path`` (rank 0) when training ends, and
    again with the test accuracy after its test.

    ``train_seconds`` and ``train_samples`` are per epoch, training steps only, timed by
    :class:`EpochClock` as the hand-written loops are (no wait for the device within an epoch);
    ``fit_seconds`` is the whole training loop, validation included (start-up, sanity check and
    test excluded); ``compile``, what ``torch.compile`` did in the process
    (:func:`benchmarks.internals.compile_counters`).

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
        self.clock = EpochClock(pl_module.device)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.clock.start()
        self.count = 0

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx
    ) -> None:
        self.clock.step_done()
        self.count += len(batch[1])

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.seconds.append(self.clock.seconds())
        self.samples.append(self.count * trainer.world_size)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.fit_seconds = now(pl_module.device) - self.fit_start
        if trainer.is_global_zero:
            self.path.write_text(json.dumps({**self._record(), "test_acc": None}))

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.is_global_zero:
            # Under ddp_spawn, fit and test each run in processes of their own: this copy of the
            # callback timed no training, the file holds what the fit's did.
            record = json.loads(self.path.read_text()) if self.path.is_file() else self._record()
            self.path.write_text(
                json.dumps({**record, "test_acc": float(trainer.callback_metrics["test/acc"])})
            )

    def _record(self) -> dict:
        record = {"train_seconds": self.seconds, "train_samples": self.samples}
        return {**record, "fit_seconds": self.fit_seconds, "compile": compile_counters()}
