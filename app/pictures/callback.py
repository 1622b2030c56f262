"""Pictures of validation: sample predictions and a confusion matrix, and PNG plots when fit ends."""

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_warn
from PIL import Image
from torch import Tensor
from torchmetrics.classification import MulticlassConfusionMatrix

from app.pictures.drawing import CURVES, Sketch, curves_figure, draw, grid_picture, matrix_picture
from app.runs.folder import run_folder
from data.contract import provided


class ValidationPictures(Callback):
    """What the classifier gets right and wrong, in pictures.

    After each validation (not the sanity check), rank 0 sends W&B and TensorBoard loggers
    ``val/samples``, the first validation images titled with predicted and true class (wrong ones
    in red), and ``val/confusion_matrix``, over the whole validation set of all ranks. When fit ends
    it writes ``curves.png`` (loss and accuracy per epoch) and ``confusion_matrix.png`` into
    ``FOLDER`` in the run folder.

    Training does not wait for the drawing: a thread of rank 0 draws the PNG files (PIL, tens of
    milliseconds) while the next epoch trains, and they go to the loggers once drawn. The end of a
    run (fit's end, the end of a validate or test, an exception such as Lightning's SIGTERM stop)
    waits for the last ones.

    The model's ``validation_step`` returns ``{"preds": class indices}``; class names come from the
    DataModule's ``class_names`` where it has them.

    Args:
        samples: images in the grid, from rank 0's first validation batch; 0 for none.
        folder: subfolder of the run folder for the PNG files.
    """

    def __init__(self, samples: int = 32, folder: str = "plots") -> None:
        self.samples, self.folder = samples, folder
        self.confusion: MulticlassConfusionMatrix | None = None
        self.matrix: Tensor | None = None  # of the last validation, at epoch `self.matrix_epoch`
        self.matrix_epoch = 0
        self.matrix_png: bytes | None = None  # the last validation's, as drawn
        self.history: dict[int, dict[str, float]] = {}  # epoch -> metric -> value
        self.trained: int | None = None  # the epoch just trained, whose train/loss is not yet recorded
        self.shown: tuple[Tensor, Tensor, Tensor] | None = None  # images, preds, labels for the grid
        self.painter: ThreadPoolExecutor | None = None
        self.scratch: str | None = None  # the painter's folder for the PNG files, until logged
        self.drawing: list[tuple[int, Future]] = []  # (global step, PNG paths by key), oldest first

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        # The model's class count (a checkpoint's, where the data is gone), else the DataModule's.
        hparams, data = pl_module.hparams, trainer.datamodule
        classes = getattr(hparams, "num_classes", None) or provided(data, "num_classes")
        if self.confusion is None and classes:
            self.confusion = MulticlassConfusionMatrix(classes)
        elif not classes:
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
        step = trainer.global_step
        sketch = Sketch(self.matrix.numpy(), self.matrix_epoch, step, _class_names(trainer), mean, std, shown)
        if self.painter is None:
            # A thread, not a process: a fork of rank 0 made each page that training then wrote a copy
            # (100,000 more page faults in a 2-epoch MNIST fit). It must not call torch: its ops would
            # start an OpenMP team of its own, and with more OpenMP threads than cores libgomp's
            # threads sleep between ops instead of spinning, which made training's epochs 5 % slower.
            self.painter = ThreadPoolExecutor(1, "validation-pictures", initializer=yield_to_training)
            self.scratch = tempfile.mkdtemp(prefix="validation-pictures-")
        self.drawing.append((step, self.painter.submit(draw, sketch, self.scratch)))

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == "fit" and not trainer.sanity_checking:
            self._record(trainer, [key for keys in CURVES.values() for key in keys if key.startswith("val/")])

    # Nothing runs at each training step: the pictures drawn go to the loggers at epoch ends (their
    # own step with them), and an epoch's train/loss is read once the epoch is over.
    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.trained = trainer.current_epoch
        self._log_drawn(trainer)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record_train_loss(trainer)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record_train_loss(trainer)

    def _record_train_loss(self, trainer: Trainer) -> None:
        """The last train/loss logged in the epoch just trained: after its end, where the model logs an
        epoch's loss that no logging step sent (the epoch's hooks run before the model's)."""
        loss = trainer.callback_metrics.get("train/loss")
        if self.trained is not None and loss is not None:
            self.history.setdefault(self.trained, {})["train/loss"] = float(loss)
        self.trained = None

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._finish(trainer)
        if not trainer.is_global_zero:
            return
        folder = run_folder(trainer) / self.folder
        folder.mkdir(parents=True, exist_ok=True)
        if self.history:
            curves_figure(self.history).savefig(folder / "curves.png")
        if self.matrix_png is not None:
            (folder / "confusion_matrix.png").write_bytes(self.matrix_png)
        elif self.matrix is not None:
            self.confusion_picture(trainer).save(folder / "confusion_matrix.png")

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
            for key, path in future.result().items():
                if key == "val/confusion_matrix":
                    self.matrix_png = Path(path).read_bytes()  # confusion_matrix.png when fit ends
                for logger in _picture_loggers(trainer):
                    if isinstance(logger, TensorBoardLogger):
                        with Image.open(path) as picture:
                            pixels = np.asarray(picture.convert("RGB"))
                        logger.experiment.add_image(key, pixels, global_step=step, dataformats="HWC")
                    else:  # W&B copies the file into its run as it logs it
                        logger.log_image(key=key, images=[path], step=step)

    def _finish(self, trainer: Trainer) -> None:
        """Log every picture still being drawn, then end the drawing thread."""
        try:
            self._log_drawn(trainer, wait=True)
        finally:
            self.drawing = []
            if self.painter is not None:
                self.painter.shutdown()
                self.painter = None
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
                self.scratch = None

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

    def confusion_picture(self, trainer: Trainer) -> Image.Image:
        """The last validation's confusion matrix, counts written in the cells if there are few classes."""
        return matrix_picture(self.matrix.numpy(), self.matrix_epoch, _class_names(trainer))

    def samples_picture(self, trainer: Trainer, images: Tensor, preds: Tensor, labels: Tensor) -> Image.Image:
        """A grid of ``images`` titled with predicted and true class; wrong ones in red."""
        datamodule = trainer.datamodule
        mean, std = provided(datamodule, "mean"), provided(datamodule, "std")
        return grid_picture(images.numpy(), preds.tolist(), labels.tolist(), _class_names(trainer), mean, std)


def yield_to_training() -> None:
    """The drawing thread at the lowest priority (Linux keeps one per thread): where training keeps every
    core busy, a drawing that takes a core from one of its OpenMP threads holds up the others at each
    op's end, which made training steps nearly twice as slow while it drew (benchmarks/README.md)."""
    # Elsewhere the id is not a thread's (OSError): the drawing keeps its priority.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _picture_loggers(trainer: Trainer) -> list[TensorBoardLogger | WandbLogger]:
    return [lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger | WandbLogger)]


def _class_names(trainer: Trainer) -> list[str]:
    names = provided(trainer.datamodule, "class_names")
    return [str(name) for name in names] if isinstance(names, Sequence) else []
