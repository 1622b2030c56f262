"""A callback that makes any CUDA host sync between two logging steps an error, and counts the syncs
of each logging step (``torch.cuda.set_sync_debug_mode``)."""

import json
import warnings
from pathlib import Path

import torch
from lightning import Callback, LightningModule, Trainer


def is_log_step(trainer: Trainer) -> bool:
    """Whether the optimizer step about to run is one Lightning logs."""
    every = trainer.log_every_n_steps
    return bool(every) and (trainer.global_step + 1) % every == 0


class SyncGuard(Callback):
    """After the first logging step: ``error`` mode over the steps between logging steps (a sync
    there raises, and the fit fails); ``warn`` mode over each logging step, from its start to the
    next step's (Lightning's logging included), its warnings counted. Validation, checkpoints and the
    epoch's last step are left alone. Writes ``FILE`` when fit ends: the steps checked, and the syncs
    of each logging step, in all and before its backward.

    Args:
        file: the JSON file written.
    """

    def __init__(self, file: str) -> None:
        self.file, self.armed, self.checked = Path(file), False, 0
        self.syncs: dict[int, int] = {}  # of each logging step, by its number
        self.before_backward: dict[int, int] = {}  # of them, before its backward
        self.caught: warnings.catch_warnings | None = None
        self.step = 0  # the logging step being counted

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, batch_idx: int):
        self._count()
        if is_log_step(trainer) and not self.armed:  # the first: one-time work (warnings) left alone
            self.armed = True
            torch.cuda.set_sync_debug_mode("default")
        elif is_log_step(trainer):
            self.caught, self.step = warnings.catch_warnings(record=True), trainer.global_step + 1
            self.records = self.caught.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        elif self.armed and batch_idx + 1 < trainer.num_training_batches:
            torch.cuda.set_sync_debug_mode("error")
            self.checked += 1
        else:
            torch.cuda.set_sync_debug_mode("default")

    def on_before_backward(self, trainer: Trainer, pl_module: LightningModule, loss) -> None:
        if self.caught is not None:
            self.before_backward[self.step] = len(self.records)

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx):
        if self.caught is not None:
            return  # counted on, through Lightning's logging of this step
        # Until the next step starts: Lightning's handling of this step, the next batch's fetch.
        last = batch_idx + 1 >= trainer.num_training_batches
        torch.cuda.set_sync_debug_mode("error" if self.armed and not last else "default")

    def _count(self) -> None:
        if self.caught is not None:
            torch.cuda.set_sync_debug_mode("default")
            self.syncs[self.step] = sum(issubclass(r.category, UserWarning) for r in self.records)
            self.caught.__exit__(None, None, None)
            self.caught = None

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._count()
        torch.cuda.set_sync_debug_mode("default")
        self.file.write_text(
            json.dumps(
                {"checked": self.checked, "syncs": self.syncs, "before_backward": self.before_backward}
            )
        )

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        torch.cuda.set_sync_debug_mode("default")
