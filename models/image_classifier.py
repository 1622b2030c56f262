"""The LightningModule: a network trained with cross-entropy, SGD and a cosine schedule."""

import torch
from lightning import LightningModule
from torch import Tensor, nn
from torch.optim.lr_scheduler import CosineAnnealingLR
from torchmetrics.classification import MulticlassAccuracy

from models.net import Net


class ImageClassifier(LightningModule):
    """Trains any :class:`Net` on (image, label) batches.

    Defaults are the seed MNIST recipe: SGD with momentum 0.9, weight decay 5e-3,
    lr 0.01 decayed along a cosine to ``final_lr_ratio`` x lr over the whole run.

    Args:
        net: the network; its sizes come from the DataModule.
        num_classes: number of classes (filled in from the DataModule).
        lr: learning rate.
        momentum: SGD momentum.
        weight_decay: L2 penalty.
        final_lr_ratio: lr at the last step, as a fraction of ``lr``.
    """

    def __init__(
        self,
        net: Net,
        num_classes: int = 10,
        lr: float = 0.01,
        momentum: float = 0.9,
        weight_decay: float = 5e-3,
        final_lr_ratio: float = 0.1,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["net"])
        self.net = net
        self.loss = nn.CrossEntropyLoss()
        self.val_acc = MulticlassAccuracy(num_classes, average="micro")
        self.test_acc = MulticlassAccuracy(num_classes, average="micro")

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = self.loss(self(x), y)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._evaluate(batch, "val", self.val_acc)

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._evaluate(batch, "test", self.test_acc)

    def predict_step(self, batch: Tensor | tuple[Tensor, ...], batch_idx: int) -> Tensor:
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        return self(x).softmax(dim=1)

    def _evaluate(self, batch: tuple[Tensor, Tensor], stage: str, accuracy: MulticlassAccuracy) -> None:
        x, y = batch
        logits = self(x)
        accuracy(logits, y)
        self.log(f"{stage}/loss", self.loss(logits, y), prog_bar=True, sync_dist=True)
        self.log(f"{stage}/acc", accuracy, prog_bar=True)

    def configure_optimizers(self) -> dict:
        hp = self.hparams
        optimizer = torch.optim.SGD(
            self.parameters(), lr=hp.lr, momentum=hp.momentum, weight_decay=hp.weight_decay
        )
        steps = max(1, int(self.trainer.estimated_stepping_batches))
        schedule = CosineAnnealingLR(optimizer, T_max=steps, eta_min=hp.lr * hp.final_lr_ratio)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
