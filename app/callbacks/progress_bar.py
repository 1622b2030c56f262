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
    """A :class:`RichProgressBar` that reads the metrics only when it redraws, and shows images/s.

    Lightning's bar reads them at every step (Lightning-AI/pytorch-lightning issue 20300), as it
    reads every value logged with ``prog_bar=True``: each read of a logged tensor waits for the GPU.
    ``metrics`` are logged without it and read here, at redraws only.

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

    def get_metrics(self, trainer: Trainer, pl_module: LightningModule) -> dict[str, Any]:
        shown = super().get_metrics(trainer, pl_module)
        logged = trainer.callback_metrics
        shown.update({key: float(logged[key]) for key in self.metrics if key in logged and key not in shown})
        return shown

    def configure_columns(self, trainer: Trainer) -> list:
        columns = super().configure_columns(trainer)
        batch = provided(trainer.datamodule, "batch_size")
        if not batch:
            return columns
        speed = ImagesPerSecond(batch * trainer.world_size, self.theme.processing_speed)
        return [speed if isinstance(c, ProcessingSpeedColumn) else c for c in columns]

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx):
        done = batch_idx + 1
        if done % self.refresh_rate == 0 or done == self.total_train_batches:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
