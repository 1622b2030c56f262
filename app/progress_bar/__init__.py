"""Optional part: Lightning's Rich progress bar, redrawn every ``refresh_rate`` steps, with images per second.

To drop it: ``rm -r app/progress_bar tests/app/progress_bar`` and its line in ``configs/defaults.yaml``;
runs then show Lightning's own progress bar.
"""

from typing import Any

import torch
from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import RichProgressBar
from lightning.pytorch.callbacks.progress.rich_progress import ProcessingSpeedColumn
from rich.progress import ProgressColumn, Task
from rich.text import Text

from data.contract import provided


class ImagesPerSecond(ProgressColumn):
    """Images per second over the task so far, all ranks together (Rich's: the last 30 s, 0.00 at first)."""

    def __init__(self, images_per_batch: int, style: str) -> None:
        super().__init__()
        self.images_per_batch, self.style = images_per_batch, style

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed
        rate = task.completed * self.images_per_batch / elapsed if elapsed else 0.0
        return Text(f"{rate:,.0f} img/s" if task.completed else "", style=self.style)


# workaround: pytorch-lightning issue 20300; gone when Lightning's bar reads values at logging steps only
class ThrottledRichProgressBar(RichProgressBar):
    """A :class:`RichProgressBar` that redraws every ``refresh_rate`` steps, shows every training value
    logged under ``prefix`` (``self.log("train/acc", acc)``) as last logged, and shows images/s.

    Lightning reads each value logged with ``prog_bar=True`` at every step (Lightning-AI/
    pytorch-lightning issue 20300): on a GPU, each read waits for the device. The values shown here
    need no ``prog_bar=True``: they are those Lightning last sent to the loggers
    (``trainer.logged_metrics``), so the bar reads nothing of its own; without a logger, it reads them
    at the steps Lightning would log, all in one copy.

    Args:
        refresh_rate: steps between redraws.
        prefix: the logged training values shown start with it.
        **kwargs: the rest of :class:`RichProgressBar`'s arguments.
    """

    def __init__(self, refresh_rate: int = 100, prefix: str = "train/", **kwargs: Any) -> None:
        super().__init__(refresh_rate=refresh_rate, **kwargs)
        self.prefix = prefix
        self.values: dict[str, float] = {}  # as read at the last logging step, where no logger reads them
        self.read_at = -1

    def get_metrics(self, trainer: Trainer, pl_module: LightningModule) -> dict[str, Any]:
        logged = trainer.logged_metrics if trainer.loggers else self.values
        shown = {name: value for name, value in logged.items() if name.startswith(self.prefix)}
        return {**super().get_metrics(trainer, pl_module), **shown}

    def configure_columns(self, trainer: Trainer) -> list:
        columns = super().configure_columns(trainer)
        batch = provided(trainer.datamodule, "batch_size")
        if not batch:
            return columns
        speed = ImagesPerSecond(batch * trainer.world_size, self.theme.processing_speed)
        return [speed if isinstance(c, ProcessingSpeedColumn) else c for c in columns]

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx):
        every, step, done = trainer.log_every_n_steps, trainer.global_step, batch_idx + 1
        if not trainer.loggers and every and step % every == 0 and step != self.read_at:
            self.values, self.read_at = self.read(trainer), step
        if done % self.refresh_rate == 0 or done == self.total_train_batches:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def read(self, trainer: Trainer) -> dict[str, float]:
        """The logged values under ``prefix``, copied to the host together: one wait for the device."""
        logged = {k: v for k, v in trainer.callback_metrics.items() if k.startswith(self.prefix)}
        values = torch.stack([v.detach().float().reshape(()) for v in logged.values()]) if logged else None
        return dict(zip(logged, values.tolist(), strict=True)) if logged else {}
