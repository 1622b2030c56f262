"""The LightningModule: a network trained with cross-entropy, SGD and a cosine schedule."""

from typing import Literal

import torch
from jsonargparse.typing import (
    ClosedUnitInterval,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    restricted_number_type,
)
from lightning import LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, LRScheduler, SequentialLR
from torchmetrics import MeanMetric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy

from models import init_from as weights_file
from models.freezing import Freezing
from models.metrics import macro_metrics
from models.nets.net import Net

# A fraction that may be 0 but not 1; the CLI's parser refuses other values.
RightOpenUnitInterval = restricted_number_type(
    "RightOpenUnitInterval", float, [(">=", 0.0), ("<", 1.0)], docstring="A float in [0, 1)."
)


def is_log_step(trainer: Trainer, every: int | None = None) -> bool:
    """Whether the optimizer step about to run is one of every ``every`` (default: Lightning's
    ``log_every_n_steps``, the steps whose metrics it sends to the loggers)."""
    every = trainer.log_every_n_steps if every is None else every
    return bool(every) and (trainer.global_step + 1) % every == 0


class ImageClassifier(LightningModule):
    """Trains any :class:`Net` on (image, label) batches.

    Defaults are the example MNIST script's recipe: SGD with momentum 0.9, weight decay 5e-3,
    lr 0.01 decayed along a cosine to ``final_lr_ratio`` x lr over the whole run, and lr
    multiplied by the number of processes (the global batch grows with them). An optional
    linear warmup comes before the cosine.

    Args:
        net: the network; its sizes come from the DataModule.
        num_classes: number of classes (filled in from the DataModule).
        lr: learning rate for one process (> 0); see ``lr_scaling``.
        momentum: SGD momentum, in [0, 1).
        nesterov: use Nesterov momentum.
        weight_decay: L2 penalty (>= 0).
        final_lr_ratio: lr at the last step, as a fraction of ``lr`` in [0, 1].
        warmup_ratio: fraction of the steps, in [0, 1), over which lr rises linearly to its peak.
        lr_scaling: how lr grows with the world size W (devices x nodes): ``linear``
            (lr x W), ``sqrt`` (lr x sqrt(W)) or ``none``.
        label_smoothing: cross-entropy label smoothing for training, in [0, 1).
        channels_last: keep weights and inputs in NHWC memory order (faster convolutions on
            recent GPUs and CPUs).
        compile: ``torch.compile`` the network in place (checkpoint keys unchanged).
        init_from: a checkpoint of another run, a state_dict or a torchvision/timm weights file: every
            tensor whose name and shape match is loaded (a new run: new optimizer and schedule).
        freeze: ``backbone`` (all but the classifier) or fnmatch patterns of parameter or module
            names (``features.*``) to keep fixed, their BatchNorm statistics too.
        unfreeze_at_epoch: the epoch from which the frozen parameters train; None: never.
        backbone_lr_ratio: their lr once unfrozen, as a fraction of the others' lr.
    """

    def __init__(
        self,
        net: Net,
        num_classes: int = 10,
        lr: PositiveFloat = 0.01,
        momentum: RightOpenUnitInterval = 0.9,
        nesterov: bool = False,
        weight_decay: NonNegativeFloat = 5e-3,
        final_lr_ratio: ClosedUnitInterval = 0.1,
        warmup_ratio: RightOpenUnitInterval = 0.0,
        lr_scaling: Literal["none", "linear", "sqrt"] = "linear",
        label_smoothing: RightOpenUnitInterval = 0.0,
        channels_last: bool = False,
        compile: bool = False,
        init_from: str | None = None,
        freeze: list[str] | str | None = None,
        unfreeze_at_epoch: NonNegativeInt | None = None,
        backbone_lr_ratio: PositiveFloat = 0.1,
    ) -> None:
        super().__init__()
        # The CLI logs the whole run config; logger=False keeps these from being logged twice.
        self.save_hyperparameters(ignore=["net"], logger=False)
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        if init_from:
            # Every rank reads the file, before DDP wraps the model (which would also broadcast rank
            # 0's weights); a resume's checkpoint is loaded after this, over every tensor.
            rank_zero_info(weights_file.load(net, init_from))
        if isinstance(freeze, str):
            freeze = [freeze]
        self.freezing = Freezing(net, freeze, unfreeze_at_epoch, backbone_lr_ratio) if freeze else None
        if self.freezing:
            rank_zero_info(self.freezing.describe())
        self.net = net.to(memory_format=self.memory_format)
        if compile:
            self.net.compile()
        self.loss = nn.CrossEntropyLoss()
        self.train_loss = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
        # Metrics, not per-rank means: each sample weighs the same whatever rank saw it.
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self.val_acc = MulticlassAccuracy(num_classes, average="micro")
        self.test_acc = MulticlassAccuracy(num_classes, average="micro")
        self.val_scores = macro_metrics(num_classes, "val")  # f1, precision, recall (macro), top-5 acc
        self.test_scores = macro_metrics(num_classes, "test")
        self.resumed_plan: dict[str, int] | None = None  # the lr schedule a resumed run had planned
        self.unlogged_loss: Tensor | None = None  # an epoch's last loss, when not logged at its step
        # What the network was trained on (classes, input size, normalization), kept in checkpoints.
        self.data_card: dict | None = None

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x.contiguous(memory_format=self.memory_format))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = self.train_loss(self(x), y)
        if is_log_step(self.trainer):
            self.log("train/loss", loss, prog_bar=True)
        elif batch_idx + 1 == self.trainer.num_training_batches:
            self.unlogged_loss = loss.detach()  # see on_train_epoch_end
        return loss

    def on_train_epoch_end(self) -> None:
        # ``self.log`` costs about half a millisecond of CPU per call, so train/loss is logged at the
        # steps Lightning sends to the loggers only; an epoch shorter than that interval sends its last
        # loss at its end, so that every logger gets it at least once per epoch (averaged over the
        # ranks: one all-reduce an epoch, and Lightning asks for it at epoch level).
        if self.unlogged_loss is not None:
            self.log("train/loss", self.unlogged_loss, sync_dist=True)
            self.unlogged_loss = None

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> dict[str, Tensor]:
        return self._evaluate(batch, "val", self.val_loss, self.val_acc, self.val_scores)

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> dict[str, Tensor]:
        return self._evaluate(batch, "test", self.test_loss, self.test_acc, self.test_scores)

    # The macro scores are logged once an epoch (self.log costs about half a millisecond a call).
    def on_validation_epoch_end(self) -> None:
        self.log_dict(self.val_scores)

    def on_test_epoch_end(self) -> None:
        self.log_dict(self.test_scores)

    def predict_step(self, batch: Tensor | tuple[Tensor, ...], batch_idx: int) -> Tensor:
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        return self(x).softmax(dim=1)

    def _evaluate(
        self,
        batch: tuple[Tensor, Tensor],
        stage: str,
        loss: MeanMetric,
        accuracy: MulticlassAccuracy,
        scores: MetricCollection,
    ) -> dict[str, Tensor]:
        """Updates and logs the stage's metrics; returns the predicted classes (for callbacks)."""
        x, y = batch
        logits = self(x)
        loss.update(self.loss(logits, y), weight=len(y))
        accuracy.update(logits, y)
        scores.update(logits, y)
        self.log(f"{stage}/loss", loss, prog_bar=True)
        self.log(f"{stage}/acc", accuracy, prog_bar=True)
        return {"preds": logits.argmax(dim=1)}

    def scaled_lr(self, world_size: int) -> float:
        """The learning rate used with ``world_size`` processes (see ``lr_scaling``)."""
        hp = self.hparams
        return hp.lr * {"none": 1, "linear": world_size, "sqrt": world_size**0.5}[hp.lr_scaling]

    def configure_optimizers(self) -> dict:
        hp = self.hparams
        world = self.trainer.world_size
        lr = self.scaled_lr(world)
        rank_zero_info(f"lr {lr:g} = {hp.lr:g} with {hp.lr_scaling} scaling to world size {world}")
        optimizer = torch.optim.SGD(
            self.freezing.param_groups(hp.weight_decay) if self.freezing else self.parameters(),
            lr=lr,
            momentum=hp.momentum,
            nesterov=hp.nesterov,
            weight_decay=hp.weight_decay,
        )
        steps = self._planned_steps()
        warmup = min(int(hp.warmup_ratio * steps), steps - 1)
        self.plan = {"steps": steps, "warmup": warmup}
        self.cosine = CosineAnnealingLR(optimizer, T_max=steps - warmup, eta_min=lr * hp.final_lr_ratio)
        schedule: LRScheduler = self.cosine
        if warmup:
            rise = LinearLR(optimizer, start_factor=1 / (warmup + 1), total_iters=warmup)
            schedule = SequentialLR(optimizer, [rise, schedule], milestones=[warmup])
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def _planned_steps(self) -> int:
        return max(1, int(self.trainer.estimated_stepping_batches))

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["lr_plan"] = self.plan
        if self.data_card:
            checkpoint["data"] = self.data_card

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.resumed_plan = checkpoint.get("lr_plan")
        self.data_card = checkpoint.get("data", self.data_card)

    def train(self, mode: bool = True) -> "ImageClassifier":
        super().train(mode)
        if self.freezing:
            self.freezing.set_modes(self.current_epoch)
        return self

    def on_train_epoch_start(self) -> None:
        if self.freezing:  # the epoch may be the unfreeze epoch
            self.freezing.set_modes(self.current_epoch)
            self.freezing.set_lrs(self.optimizers().optimizer, self.current_epoch, self.hparams.weight_decay)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.freezing:
            self.freezing.drop_grads(self.current_epoch)

    def lr_scheduler_step(self, scheduler: LRScheduler, metric: object = None) -> None:
        super().lr_scheduler_step(scheduler, metric)
        if self.freezing:
            self.freezing.set_lrs(self.optimizers().optimizer, self.current_epoch, self.hparams.weight_decay)

    def on_train_start(self) -> None:
        self.on_train_epoch_start()  # a resume mid-epoch does not call it
        # A resume restores the schedule as it was planned; a run made longer or shorter since would
        # follow the old cosine past its end, where the lr climbs back up. Set at the restored lr, the
        # cosine's length only shapes what is left of it: it goes on from that lr to its floor at the new end.
        old, steps = self.resumed_plan, self._planned_steps()
        if old and old["steps"] != steps:
            self.cosine.T_max = max(1, steps - old["warmup"])
            self.plan = {"steps": steps, "warmup": old["warmup"]}
            rank_zero_info(
                f"lr schedule: this run now ends at step {steps} (planned: {old['steps']}); the cosine "
                f"goes on from lr {self.optimizers().param_groups[0]['lr']:.4g} to its floor there"
            )
