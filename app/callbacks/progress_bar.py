"""Lightning's Rich progress bar, redrawn every ``refresh_rate`` steps, with images per second."""

from collections.abc import Sequence
from typing import Any

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


class ThrottledRichProgressBar(RichProgressBar):
    """A :class:`RichProgressBar` that redraws every ``refresh_rate`` steps, reads the metrics it
    shows at the steps Lightning logs only, and shows images/s.

    Lightning's bar reads them at every step (Lightning-AI/pytorch-lightning issue 20300), as it
    reads every value logged with ``prog_bar=True``: each read of a logged tensor waits for the GPU.
    ``metrics`` are logged without it and read here when they were just logged (the template's loss
    is then a host value already); a redraw shows them as last read.

    Args:
        refresh_rate: steps between redraws.
        metrics: logged training values shown, as last logged.
        **kwargs: the rest of :class:`RichProgressBar`'s arguments.
    """

    def __init__(
        self, refresh_rate: int = 100, metrics: Sequence[str] = ("train/loss",), **kwargs: Any
    ) -> None:
        super().__init__(refresh_rate=refresh_rate, **kwargs)
        self.metrics = list(metrics)
        self.values: dict[str, float] = {}  # as read at the last logging step
        self.read_at = -1

    def get_metrics(self, trainer: Trainer, pl_module: LightningModule) -> dict[str, Any]:
        shown = super().get_metrics(trainer, pl_module)
        shown.update({key: value for key, value in self.values.items() if key not in shown})
        return shown

    def configure_columns(self, trainer: Trainer) -> list:
        columns = super().configure_columns(trainer)
        batch = provided(trainer.datamodule, "batch_size")
        if not batch:
            return columns
        speed = ImagesPerSecond(batch * trainer.world_size, self.theme.processing_speed)
        return [speed if isinstance(c, ProcessingSpeedColumn) else c for c in columns]

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx):
        every, step = trainer.log_every_n_steps, trainer.global_step
        if every and step % every == 0 and step != self.read_at:  # a step just logged
            logged = trainer.callback_metrics
            self.values.update({key: float(logged[key]) for key in self.metrics if key in logged})
            self.read_at = step
        done = batch_idx + 1
        if done % self.refresh_rate == 0 or done == self.total_train_batches:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
