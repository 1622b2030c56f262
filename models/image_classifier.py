"""The LightningModule: a network trained with the optimizer, schedule and loss the config names."""

import functools
import json
import warnings
from typing import Literal

import torch
from jsonargparse.typing import NonNegativeFloat, NonNegativeInt, PositiveFloat
from lightning import LightningModule
from lightning.pytorch.cli import OptimizerCallable
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn
from torch.optim.lr_scheduler import LRScheduler
from torchmetrics import MeanMetric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy
from torchvision.transforms import v2

from models import cuda_graphs as cuda_graphs_
from models import init_from as weights_file
from models import optimization
from models.errors import ModelError
from models.freezing import Freezing
from models.inference import Inference
from models.metrics import macro_metrics
from models.nets.net import Net
from models.schedules import RightOpenUnitInterval, SchedulerCallable

# The arguments that are objects (a network, callables); in a checkpoint, the config that built them.
OBJECTS = ("net", "optimizer", "scheduler")

# Hyperparameters that shape the optimizer's parameter groups: a resume must keep them.
OPTIMIZER_LAYOUT = ("freeze", "norm_weight_decay")

# The example MNIST script's optimizer, as configs/defaults.yaml spells it out for the CLI.
DEFAULT_OPTIMIZER = functools.partial(torch.optim.SGD, lr=0.01, momentum=0.9, weight_decay=5e-3)


def _as_list(value: object) -> list:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


class ImageClassifier(Inference, LightningModule):
    """Trains a network on (image, label) batches.

    The recipe is configuration (``configs/defaults.yaml``: the example MNIST script's SGD, momentum
    0.9, weight decay 5e-3, lr 0.01 along a cosine to 0.1 x lr, stepped every batch). Whatever the
    optimizer and schedule, every learning rate grows with the number of processes (``lr_scaling``)
    and a schedule that takes a length gets the run's.

    Args:
        net: the network: ours by name (``ResNet``), or any ``nn.Module`` class by its import path;
            ``in_channels``, ``num_classes`` and ``image_size`` come from the DataModule where its
            ``__init__`` takes them.
        num_classes: number of classes (filled in from the DataModule).
        optimizer: any ``torch.optim`` class or your own (class_path and init_args), given the
            parameter groups; its ``lr`` is for one process. None: :data:`DEFAULT_OPTIMIZER`.
        scheduler: any LR scheduler class (``torch.optim.lr_scheduler``, :class:`WarmupCosineLR`,
            your own); None keeps the lr fixed.
        scheduler_interval: step the schedule every ``step`` or every ``epoch`` (its length is counted
            in the same unit). ReduceLROnPlateau steps after each validation.
        scheduler_monitor: the validation metric ReduceLROnPlateau watches.
        lr_scaling: how every lr grows with the global batch, N times one device's batch (N: world size
            W = devices x nodes, times ``--trainer.accumulate_grad_batches``): ``linear`` (x N),
            ``sqrt`` (x sqrt(N)) or ``none``.
        norm_weight_decay: the weight decay of norm layers' weights and all biases (0: none, as in
            torchvision's recipes); None: the optimizer's, like every other parameter.
        label_smoothing: cross-entropy label smoothing for training, in [0, 1).
        class_weights: cross-entropy weight of each class in training: a list (one per class), or
            ``balanced`` (N / (classes x count), from the training labels).
        mixup_alpha: mix pairs of training images and their labels (torchvision's MixUp), with this
            Beta(alpha, alpha) parameter; None: off.
        cutmix_alpha: paste a box of one training image into another (torchvision's CutMix); with
            ``mixup_alpha`` too, each batch gets one of the two at random; None: off.
        channels_last: keep weights and inputs in NHWC memory order (faster convolutions on
            recent GPUs and CPUs).
        compile: ``torch.compile`` the network in place (checkpoint keys unchanged).
        cuda_graphs: capture the network's training forward and backward as CUDA graphs and replay
            them (``torch.compile`` mode ``reduce-overhead``): one launch a step, not one a kernel. One
            CUDA device, full batches (an epoch's last, smaller one runs eagerly); checked before fit.
        init_from: a checkpoint of another run, a state_dict or a torchvision/timm weights file: every
            tensor whose name and shape match is loaded (a new run: new optimizer and schedule).
        freeze: ``backbone`` (all but the classifier) or fnmatch patterns of parameter or module
            names (``features.*``) to keep fixed, their BatchNorm statistics too.
        unfreeze_at_epoch: the epoch from which the frozen parameters train; None: never.
        backbone_lr_ratio: their lr once unfrozen, as a fraction of the others' lr.
    """

    def __init__(
        self,
        net: Net | nn.Module,
        num_classes: int = 10,
        optimizer: OptimizerCallable | None = None,
        scheduler: SchedulerCallable | None = None,
        scheduler_interval: Literal["step", "epoch"] = "step",
        scheduler_monitor: str = "val/loss",
        lr_scaling: Literal["none", "linear", "sqrt"] = "linear",
        norm_weight_decay: NonNegativeFloat | None = None,
        label_smoothing: RightOpenUnitInterval = 0.0,
        class_weights: Literal["balanced"] | list[PositiveFloat] | None = None,
        mixup_alpha: PositiveFloat | None = None,
        cutmix_alpha: PositiveFloat | None = None,
        channels_last: bool = False,
        compile: bool = False,
        cuda_graphs: bool = False,
        init_from: str | None = None,
        freeze: list[str] | str | None = None,
        unfreeze_at_epoch: NonNegativeInt | None = None,
        backbone_lr_ratio: PositiveFloat = 0.1,
    ) -> None:
        super().__init__()
        # Under the CLI, Lightning saves every argument as the run's config gave it (the network, optimizer
        # and schedule as class_path and init_args): load_from_checkpoint(path) rebuilds the model from that
        # alone. Built in Python they are objects, which a checkpoint must not pickle: left out. logger=False:
        # the CLI logs the whole run config already.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Lightning's advice to leave out a network object: done below
            self.save_hyperparameters(logger=False)
        configs = {k: self.hparams[k] for k in OBJECTS if isinstance(self.hparams.get(k), dict)}
        for key in (k for k in OBJECTS if k not in configs):
            self.hparams.pop(key, None)  # what remove_ignored_hparams does (lightning 2.6.0 has none)
        # Plain values (what a DataModule links in may be typed: PositiveInt), for weights-only loading.
        self.hparams.update(json.loads(json.dumps(configs)))
        self.optimizer = optimization.plain(optimizer or DEFAULT_OPTIMIZER)
        self.scheduler = optimization.plain(scheduler) if scheduler is not None else None
        # Metrics, not per-rank means: each sample weighs the same whatever rank saw it.
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self.val_acc = MulticlassAccuracy(num_classes, average="micro")
        self.test_acc = MulticlassAccuracy(num_classes, average="micro")
        self.val_scores = macro_metrics(num_classes, "val")  # f1, precision, recall (macro), top-5 acc
        self.test_scores = macro_metrics(num_classes, "test")
        # What a ReduceLROnPlateau schedule can watch: the metrics logged at validation.
        logged = ["val/loss", "val/acc", *self.val_scores.keys()]
        optimization.try_out(self.optimizer, self.scheduler, scheduler_monitor, logged)
        self.monitorable = ["train/loss", *logged]  # what a callback (the best checkpoint's) can monitor
        if isinstance(class_weights, list) and len(class_weights) != num_classes:
            raise ModelError(
                f"--model.class_weights has {len(class_weights)} weights, the data has {num_classes} "
                "classes: give one per class, or 'balanced'"
            )
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
        self.graphed = cuda_graphs_.GraphedNet(self.net) if cuda_graphs else None
        self.loss = nn.CrossEntropyLoss()
        # Not saved: checkpoints of runs with and without class weights hold the same tensors.
        weights = torch.tensor(class_weights) if isinstance(class_weights, list) else None
        self.register_buffer("class_weight", weights, persistent=False)
        mixes = [
            mix(alpha=alpha, num_classes=num_classes)
            for mix, alpha in ((v2.CutMix, cutmix_alpha), (v2.MixUp, mixup_alpha))
            if alpha is not None
        ]
        self.mix = v2.RandomChoice(mixes) if len(mixes) > 1 else mixes[0] if mixes else None
        self.resumed_plan: dict[str, int] | None = None  # the lr schedule a resumed run had planned
        # What the network was trained on (classes, input size, normalization), kept in checkpoints.
        self.data_card: dict | None = None

    def forward(self, x: Tensor) -> Tensor:
        x = x.contiguous(memory_format=self.memory_format)
        return self.graphed(x) if self.graphed is not None and self.training else self.net(x)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        if self.mix is not None:
            x, y = self.mix(x, y)  # y: each image's share of each class
        logits = self(x)
        loss = nn.functional.cross_entropy(
            logits, y, weight=self.class_weight, label_smoothing=self.hparams.label_smoothing
        )
        # Not prog_bar=True, whose values Lightning reads every step: the bar shows every train/ value.
        self.log("train/loss", loss)
        return loss

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

    def setup(self, stage: str) -> None:
        if stage == "fit" and self.graphed is not None:
            cuda_graphs_.check(self.trainer, self.hparams.compile)
        data = self.trainer.datamodule
        shape = getattr(data, "in_channels", None), getattr(data, "image_size", None)
        if stage == "fit" and self.example_input_array is None and all(shape) and not self.hparams.compile:
            # One image: the model summary then shows each layer's output size and the FLOPs (a compiled
            # network would compile for it).
            self.example_input_array = torch.zeros(1, shape[0], shape[1], shape[1])
        if stage == "fit" and self.hparams.class_weights == "balanced":
            counts = getattr(self.trainer.datamodule, "class_counts", None)
            if counts is None:
                raise ModelError(
                    f"--model.class_weights balanced needs the training labels: "
                    f"{type(self.trainer.datamodule).__name__} has no class_counts(); give a list of weights"
                )
            counts = torch.tensor(counts(), dtype=torch.float32)
            # sklearn's 'balanced': N / (classes x count); a class without samples weighs nothing.
            weight = counts.sum() / (len(counts) * counts.clamp(min=1)) * (counts > 0)
            self.class_weight = weight.to(self.device)
            shown = ", ".join(f"{w:.3g}" for w in weight.tolist()[:10])
            rank_zero_info(f"class weights (balanced): {shown}{', ...' if len(counts) > 10 else ''}")

    def lr_factor(self, world_size: int, accumulate: int = 1) -> float:
        """What every lr is multiplied by with ``world_size`` processes, each adding up the gradients of
        ``accumulate`` batches per step (see ``lr_scaling``)."""
        n = world_size * accumulate
        return {"none": 1, "linear": n, "sqrt": n**0.5}[self.hparams.lr_scaling]

    def scaled_lr(self, world_size: int, accumulate: int = 1) -> float | None:
        """The optimizer's lr with ``world_size`` processes accumulating ``accumulate`` batches; None where
        it takes no ``lr``."""
        lr = optimization.base_lr(self.optimizer)
        return None if lr is None else lr * self.lr_factor(world_size, accumulate)

    def configure_optimizers(self) -> dict:
        hp, world, accumulate = self.hparams, self.trainer.world_size, self.trainer.accumulate_grad_batches
        factor = self.lr_factor(world, accumulate)
        frozen = self.freezing.names if self.freezing else set()
        groups = optimization.param_groups(self.net, frozen, hp.norm_weight_decay)
        optimizer = optimization.build_optimizer(self.optimizer, groups, factor)
        lr = optimizer.param_groups[0]["lr"]
        accumulated = f" x {accumulate} accumulated batches" if accumulate > 1 else ""
        rank_zero_info(
            f"lr {lr:g} = {lr / factor:g} with {hp.lr_scaling} scaling to world size {world}{accumulated}"
        )
        self.plan = {"optimizer": type(optimizer).__name__, "scheduler": None}
        if self.scheduler is None:
            return {"optimizer": optimizer}
        length = self._planned_length()
        scheduler = optimization.build_scheduler(self.scheduler, optimizer, length, factor)
        self.plan.update(scheduler=type(scheduler).__name__, length=length, interval=hp.scheduler_interval)
        config = {"scheduler": scheduler, "interval": hp.scheduler_interval}
        if optimization.steps_per_validation(scheduler):
            every = self.trainer.check_val_every_n_epoch or 1
            config.update(interval="epoch", frequency=every, monitor=hp.scheduler_monitor)
        return {"optimizer": optimizer, "lr_scheduler": config}

    def _planned_length(self) -> int:
        """The run's length in scheduler steps: optimizer steps, or epochs."""
        steps = max(1, int(self.trainer.estimated_stepping_batches))
        if self.hparams.scheduler_interval == "step":
            return steps
        epochs, per_epoch = self.trainer.max_epochs, max(1, self.trainer.num_training_batches)
        return epochs if epochs and epochs > 0 else max(1, -(-steps // per_epoch))

    def why_not_resume(self, checkpoint: dict, path: str) -> str | None:
        """Why training cannot go on from ``checkpoint`` (at ``path``) with this recipe; None if it can."""
        hparams, theirs = self.hparams, checkpoint.get("hyper_parameters", {})
        for key in OPTIMIZER_LAYOUT:
            there, here = _as_list(theirs.get(key)), _as_list(hparams.get(key))
            if there != here:
                return (
                    f"--ckpt_path {path} was trained with --model.{key} {there}, this run has {here}: its "
                    f"optimizer cannot continue; resume with its setting, or start a new run from its "
                    f"weights with --model.init_from {path}"
                )
        plan = checkpoint.get("lr_plan") or {}
        if "optimizer" not in plan:
            return (
                f"--ckpt_path {path} was written before the optimizer was configurable: its schedule's "
                f"state cannot be read; start a new run from its weights with --model.init_from {path}"
            )
        for key in ("optimizer", "scheduler"):
            cls = optimization.class_of(getattr(self, key)) if getattr(self, key) is not None else None
            there, mine = plan[key], cls.__name__ if cls else None
            if there != mine:
                return (
                    f"--ckpt_path {path} was trained with --model.{key} {there}, this run has {mine}: "
                    f"resume with its {key}, or start a new run from its weights: --model.init_from {path}"
                )
        return None

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["lr_plan"] = self.plan
        if self.data_card:
            checkpoint["data"] = self.data_card

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.resumed_plan = checkpoint.get("lr_plan")
        self.data_card = checkpoint.get("data", self.data_card)
        # Built by load_from_checkpoint from the config of these: kept for the checkpoints it writes next.
        saved = checkpoint.get("hyper_parameters", {})
        self.hparams.update(
            {k: saved[k] for k in OBJECTS if k not in self.hparams and isinstance(saved.get(k), dict)}
        )

    def train(self, mode: bool = True) -> "ImageClassifier":
        super().train(mode)
        if self.freezing:
            self.freezing.set_modes(self.current_epoch)
        return self

    def on_train_epoch_start(self) -> None:
        if self.freezing:  # the epoch may be the unfreeze epoch
            self.freezing.set_modes(self.current_epoch)
            self.freezing.set_lrs(self.optimizers().optimizer, self.current_epoch)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.freezing:
            self.freezing.drop_grads(self.current_epoch)

    def lr_scheduler_step(self, scheduler: LRScheduler, metric: object = None) -> None:
        super().lr_scheduler_step(scheduler, metric)
        if self.freezing:
            self.freezing.set_lrs(self.optimizers().optimizer, self.current_epoch)

    def on_train_start(self) -> None:
        self.on_train_epoch_start()  # a resume mid-epoch does not call it
        old = self.resumed_plan
        if not old or self.scheduler is None or old.get("length") == self.plan["length"]:
            return
        # A resume restores the schedule as it was planned; a run made longer or shorter since would
        # follow it past its end (a cosine climbs back up).
        rank_zero_info(optimization.stretch(self.lr_schedulers(), old["length"], self.plan))
