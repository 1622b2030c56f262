"""Pictures of validation: sample predictions and a confusion matrix, and PNG plots when fit ends."""

import math
import multiprocessing
import os
import signal
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_warn
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor
from torch.nn import functional as F
from torchmetrics.classification import MulticlassConfusionMatrix
from torchvision.utils import make_grid

from data.contract import provided

CURVES = {"loss": ("train/loss", "val/loss"), "accuracy": ("val/acc",)}
TEXT_UP_TO = 20  # classes: beyond, counts and names in the matrix's cells would be unreadable
CELL_INCHES, TITLE_INCHES, GAP = 1.6, 0.35, 2  # sample grid: image width, title band, pixels between


@dataclass(frozen=True)
class Sketch:
    """What one validation's pictures are drawn from: plain CPU data, sent to the drawing process."""

    matrix: np.ndarray
    epoch: int
    names: list[str]
    mean: Sequence[float] | None
    std: Sequence[float] | None
    shown: tuple[np.ndarray, list[int], list[int]] | None  # images, preds, labels


class ValidationPictures(Callback):
    """What the classifier gets right and wrong, drawn with matplotlib.

    After each validation (not the sanity check), rank 0 sends W&B and TensorBoard loggers
    ``val/samples``, the first validation images titled with predicted and true class (wrong ones
    in red), and ``val/confusion_matrix``, over the whole validation set of all ranks. When fit ends
    it writes ``curves.png`` (loss and accuracy per epoch) and ``confusion_matrix.png`` into
    ``FOLDER`` under ``trainer.default_root_dir``.

    Training does not wait for the drawing: a forked process of rank 0 draws while the next epoch
    trains, and the pictures go to the loggers once drawn. The end of a run (fit's end, the end
    of a validate or test, an exception such as Lightning's SIGTERM stop) waits for the last ones.

    The model's ``validation_step`` returns ``{"preds": class indices}``; class names come from the
    DataModule's ``class_names`` where it has them.

    Args:
        samples: images in the grid, from rank 0's first validation batch; 0 for none.
        folder: subfolder of ``trainer.default_root_dir`` for the PNG files.
    """

    def __init__(self, samples: int = 32, folder: str = "plots") -> None:
        self.samples, self.folder = samples, folder
        self.confusion: MulticlassConfusionMatrix | None = None
        self.matrix: Tensor | None = None  # of the last validation, at epoch `self.matrix_epoch`
        self.matrix_epoch = 0
        self.history: dict[int, dict[str, float]] = {}  # epoch -> metric -> value
        self.last_loss: Tensor | None = None  # of this epoch's last training step
        self.shown: tuple[Tensor, Tensor, Tensor] | None = None  # images, preds, labels for the grid
        self.painter: ProcessPoolExecutor | None = None
        self.drawing: list[tuple[int, Future]] = []  # (global step, pictures by key), oldest first

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        # The model's first: it holds the checkpoint's count where the data is gone (predict, export).
        num_classes = getattr(pl_module.hparams, "num_classes", None)
        num_classes = num_classes or provided(trainer.datamodule, "num_classes")
        if self.confusion is None and num_classes:
            self.confusion = MulticlassConfusionMatrix(num_classes)
        elif not num_classes:
            rank_zero_warn(
                "ValidationPictures: neither the DataModule nor the model has num_classes; no pictures"
            )

    def on_validation_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.shown = None
        if self.confusion is not None:
            self.confusion.to(pl_module.device)
            self.confusion.reset()

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if trainer.sanity_checking or self.confusion is None:
            return
        preds = outputs.get("preds") if isinstance(outputs, Mapping) else None
        if preds is None:
            rank_zero_warn("ValidationPictures: validation_step returns no {'preds': ...}; no pictures")
            self.confusion = None  # every rank gets the same outputs, so all stop alike
            return
        images, labels = batch[0], batch[1]
        self.confusion.update(preds, labels)
        if self.shown is None and self.samples > 0 and trainer.is_global_zero:
            n = self.samples
            self.shown = (images[:n].detach().float().cpu(), preds[:n].cpu(), labels[:n].cpu())

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking or self.confusion is None:
            return
        # On every rank: compute() gathers the counts of all ranks when torch.distributed runs.
        self.matrix, self.matrix_epoch = self.confusion.compute().cpu(), trainer.current_epoch
        if not trainer.is_global_zero or not _picture_loggers(trainer):
            return
        self._log_drawn(trainer)
        datamodule = trainer.datamodule
        shown = None
        if self.shown is not None:
            images, preds, labels = self.shown
            shown = (images.numpy(), preds.tolist(), labels.tolist())
        mean, std = provided(datamodule, "mean"), provided(datamodule, "std")
        sketch = Sketch(self.matrix.numpy(), self.matrix_epoch, _class_names(trainer), mean, std, shown)
        if self.painter is None:
            # Forked: it has the modules already (a spawned one would import torch again while the
            # epoch trains), and it is sent only the sketch.
            context = multiprocessing.get_context("fork")
            self.painter = ProcessPoolExecutor(1, mp_context=context, initializer=_painter_start)
        self.drawing.append((trainer.global_step, self.painter.submit(draw, sketch)))

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == "fit" and not trainer.sanity_checking:
            self._record(trainer, [key for keys in CURVES.values() for key in keys if key.startswith("val/")])

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.last_loss = outputs["loss"] if isinstance(outputs, Mapping) else outputs
        if self.drawing and self.drawing[0][1].done():
            self._log_drawn(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # The step's own loss: the model may log an epoch's last loss only after this hook (and the
        # logged train/loss would then be the epoch before's).
        if isinstance(self.last_loss, Tensor):
            self.history.setdefault(trainer.current_epoch, {})["train/loss"] = float(self.last_loss)
        self.last_loss = None

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._finish(trainer)
        if not trainer.is_global_zero:
            return
        folder = Path(trainer.default_root_dir) / self.folder
        folder.mkdir(parents=True, exist_ok=True)
        if self.history:
            curves_figure(self.history).savefig(folder / "curves.png")
        if self.matrix is not None:
            self.confusion_figure(trainer).savefig(folder / "confusion_matrix.png")

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._finish(trainer)

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        try:
            self._finish(trainer)
        except Exception as error:  # the run's own exception is the one to report
            rank_zero_warn(f"ValidationPictures: the last pictures were not logged: {error!r}")

    def _log_drawn(self, trainer: Trainer, wait: bool = False) -> None:
        """Send the loggers the pictures drawn so far, in order; with ``wait``, all of them."""
        while self.drawing and (wait or self.drawing[0][1].done()):
            step, future = self.drawing.pop(0)
            for key, pixels in future.result().items():
                for logger in _picture_loggers(trainer):
                    if isinstance(logger, TensorBoardLogger):
                        logger.experiment.add_image(key, pixels, global_step=step, dataformats="HWC")
                    else:
                        logger.log_image(key=key, images=[pixels], step=step)

    def _finish(self, trainer: Trainer) -> None:
        """Log every picture still being drawn, then end the drawing process."""
        try:
            self._log_drawn(trainer, wait=True)
        finally:
            self.drawing = []
            if self.painter is not None:
                self.painter.shutdown()
                self.painter = None

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = {int(epoch): dict(point) for epoch, point in state_dict["history"].items()}

    def _record(self, trainer: Trainer, keys: list[str]) -> None:
        point = self.history.setdefault(trainer.current_epoch, {})
        for key in keys:
            value = trainer.callback_metrics.get(key)
            if value is not None:
                point[key] = float(value)

    def confusion_figure(self, trainer: Trainer) -> Figure:
        """The last validation's confusion matrix, counts written in the cells if there are few classes."""
        return matrix_figure(self.matrix, self.matrix_epoch, _class_names(trainer))

    def samples_figure(self, trainer: Trainer, images: Tensor, preds: Tensor, labels: Tensor) -> Figure:
        """A grid of ``images`` titled with predicted and true class; wrong ones in red."""
        datamodule = trainer.datamodule
        mean, std = provided(datamodule, "mean"), provided(datamodule, "std")
        return grid_figure(images, preds, labels, _class_names(trainer), mean, std)


def draw(sketch: Sketch) -> dict[str, np.ndarray]:
    """The pictures of one validation as (H, W, 3) uint8 arrays, by logger key."""
    names = sketch.names
    figures = {"val/confusion_matrix": matrix_figure(torch.from_numpy(sketch.matrix), sketch.epoch, names)}
    if sketch.shown is not None:
        images, preds, labels = sketch.shown
        grid = grid_figure(
            torch.from_numpy(images),
            torch.tensor(preds),
            torch.tensor(labels),
            names,
            sketch.mean,
            sketch.std,
        )
        figures["val/samples"] = grid
    return {key: _pixels(fig) for key, fig in figures.items()}


def matrix_figure(matrix: Tensor, epoch: int, names: Sequence[str]) -> Figure:
    """A confusion matrix, counts written in the cells if there are few classes."""
    n = len(matrix)
    few = n <= TEXT_UP_TO
    fig = _figure(2 + 0.7 * min(n, 26), 2 + 0.7 * min(n, 26))
    labels = _first(names, n) if few else None
    MulticlassConfusionMatrix(n).plot(matrix, ax=fig.add_subplot(), add_text=few, labels=labels)
    fig.suptitle(f"validation, epoch {epoch}: {int(matrix.sum())} samples")
    return fig


def grid_figure(
    images: Tensor,
    preds: Tensor,
    labels: Tensor,
    names: Sequence[str],
    mean: Sequence[float] | None,
    std: Sequence[float] | None,
) -> Figure:
    """A grid of ``images`` titled with predicted and true class; wrong ones in red.

    One picture (torchvision's ``make_grid``) with a white band above each image for its title:
    as 32 subplots, matplotlib took about a second per validation to lay it out.
    """
    names = _first(names, 1 + max(int(preds.max()), int(labels.max())))
    cols = min(8, len(images))
    height, width = images.shape[-2:]
    inches = CELL_INCHES / (width + GAP)  # per pixel of the grid
    band = math.ceil(TITLE_INCHES / inches)
    shown = torch.stack([_displayable(image, mean, std) for image in images])
    grid = make_grid(F.pad(shown, (0, 0, band, 0), value=1.0), nrow=cols, padding=GAP, pad_value=1.0)
    fig = _figure(grid.shape[2] * inches, grid.shape[1] * inches, layout=None)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.imshow(grid.permute(1, 2, 0).numpy(), interpolation="nearest")
    for i, (pred, label) in enumerate(zip(preds.tolist(), labels.tolist(), strict=True)):
        row, col = divmod(i, cols)
        x = GAP + col * (width + GAP) + width / 2
        y = GAP + row * (height + band + GAP) + band / 2
        wrong = pred != label
        title = f"{'✗ ' if wrong else ''}pred {names[pred]}\ntrue {names[label]}"
        ax.text(x, y, title, ha="center", va="center", fontsize=8, color="red" if wrong else "black")
    return fig


def curves_figure(history: Mapping[int, Mapping[str, float]]) -> Figure:
    """One panel per entry of :data:`CURVES`, each metric against the epoch."""
    fig = _figure(5 * len(CURVES), 4)
    axes = fig.subplots(1, len(CURVES), squeeze=False).flat
    for ax, (title, keys) in zip(axes, CURVES.items(), strict=True):
        for key in keys:
            epochs = [epoch for epoch in sorted(history) if key in history[epoch]]
            ax.plot(epochs, [history[epoch][key] for epoch in epochs], "o-", label=key)
        ax.set(title=title, xlabel="epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    return fig


def _figure(width: float, height: float, layout: str | None = "constrained") -> Figure:
    # Not pyplot's: no backend is picked (nor a display sought), and the figure is freed with its last
    # reference instead of being kept by pyplot until closed.
    fig = Figure(figsize=(width, height), dpi=100, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def _pixels(fig: Figure) -> np.ndarray:
    """The figure rendered as an (H, W, 3) uint8 array."""
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def _picture_loggers(trainer: Trainer) -> list[TensorBoardLogger | WandbLogger]:
    return [lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger | WandbLogger)]


def _painter_start() -> None:
    # The drawing process yields the cores to training, and outlives a signal sent to the whole
    # job: rank 0 stops on it, then waits for the pictures still being drawn.
    os.nice(10)
    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _class_names(trainer: Trainer) -> list[str]:
    names = provided(trainer.datamodule, "class_names")
    return [str(name) for name in names] if isinstance(names, Sequence) else []


def _first(names: Sequence[str], n: int) -> list[str]:
    """``n`` class names: the known ones, then indices."""
    return list(names[:n]) + [str(i) for i in range(len(names), n)]


def _displayable(image: Tensor, mean: Sequence[float] | None, std: Sequence[float] | None) -> Tensor:
    """A normalized (C, H, W) image as 1 or 3 channels of floats in [0, 1]."""
    image = image[:3] if len(image) >= 3 else image[:1]
    if mean is not None and std is not None and len(mean) >= len(image) and len(std) >= len(image):
        image = image * image.new_tensor(std[: len(image)])[:, None, None]
        image = image + image.new_tensor(mean[: len(image)])[:, None, None]
    else:
        image = (image - image.min()) / (image.max() - image.min()).clamp(min=1e-12)
    return image.clamp(0, 1)
