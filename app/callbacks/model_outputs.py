"""What the callbacks that score predictions read of the model: its class count and predicted classes."""

from collections.abc import Mapping
from typing import Any

from lightning import LightningModule, Trainer
from torch import Tensor

from data.contract import provided


def num_classes(trainer: Trainer, pl_module: LightningModule) -> int | None:
    """The model's class count (a checkpoint's, where the data is gone), else the DataModule's."""
    return getattr(pl_module.hparams, "num_classes", None) or provided(trainer.datamodule, "num_classes")


def predicted_classes(outputs: Any) -> Tensor | None:
    """The class indices an evaluation step returned as ``{"preds": ...}``; None where it returned none."""
    return outputs.get("preds") if isinstance(outputs, Mapping) else None
