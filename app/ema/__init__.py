"""An exponential moving average (EMA) of the weights, evaluated and saved in place of the weights."""

from typing import Any

from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import EMAWeightAveraging as LightningEMA
from lightning.pytorch.trainer.states import TrainerFn


class EMAWeightAveraging(LightningEMA):
    """Lightning's ``EMAWeightAveraging``, with the average on the training device and fit's test averaged.

    After each optimizer step the average becomes ``decay`` x average + (1 - ``decay``) x weights (the
    first step's weights to begin with). Lightning's callback swaps it in for validation and saves it as
    each checkpoint's ``state_dict``, the training weights beside it, so every ``--ckpt_path`` (validate,
    test, predict, export, ``--model.init_from``) loads the average; a resumed fit puts the training
    weights back and goes on averaging. Under DDP every rank holds the same average, its BatchNorm
    statistics (averaged too) only with ``--trainer.sync_batchnorm`` (``configs/ddp.yaml``): without it
    each rank averages its own, and rank 0's are saved. Stack ``configs/ema.yaml`` to add it.
    """

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        # Lightning copies the model here, onto the model's device, before the strategy moves it: on a
        # GPU the average would stay on the CPU, every weight copied there from the GPU at every step.
        # Moved now (where the strategy puts it anyway), the copy lands on the training device.
        pl_module.to(trainer.strategy.root_device)
        super().setup(trainer, pl_module, stage)

    def on_load_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        # Lightning loads the training weights over the average whenever it has an average, which it keeps
        # after fit: fit's final test of the best checkpoint would run the training weights. Outside fit
        # the average the checkpoint holds as its state_dict stays (and Lightning's warning is not given).
        if trainer.state.fn == TrainerFn.FITTING:
            super().on_load_checkpoint(trainer, pl_module, checkpoint)
