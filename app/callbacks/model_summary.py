"""The model summary at the start of fit: the network's layers, their sizes and FLOPs."""

import torch
from lightning import LightningModule, Trainer
from lightning.pytorch.utilities.model_summary import ModelSummary as Summary
from torch import nn
from torchmetrics import Metric, MetricCollection

from app.internals import SummaryBuiltHere
from data.contract import provided


class _LayersOnly(Summary):
    # Metrics and loss functions are modules of the LightningModule, not layers of the network.
    @property
    def named_modules(self) -> list[tuple[str, nn.Module]]:
        skipped = Metric | MetricCollection | nn.modules.loss._Loss
        return [(n, m) for n, m in super().named_modules if not isinstance(m, skipped)]


class ModelSummary(SummaryBuiltHere):
    """Lightning's Rich summary, with layers only, and FLOPs and sizes for one image of the data.

    Lightning counts FLOPs (and shows input and output sizes) only for a model with an
    ``example_input_array``; one image shaped as the DataModule says is used when the model has none.
    """

    def build_summary(self, trainer: Trainer, pl_module: LightningModule, max_depth: int) -> Summary:
        channels = provided(trainer.datamodule, "in_channels")
        size = provided(trainer.datamodule, "image_size")
        given = pl_module.example_input_array
        if given is None and channels and size and not getattr(pl_module, "hparams", {}).get("compile"):
            pl_module.example_input_array = torch.zeros(1, channels, size, size)
        try:
            return _LayersOnly(pl_module, max_depth=max_depth)
        finally:
            pl_module.example_input_array = given
