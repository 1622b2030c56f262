"""ImageClassifier in a real Trainer: the recipe's optimizer and its lr schedule."""

import pytest
from lightning import Trainer

from data import MNISTDataModule
from models import ImageClassifier, MnistCNN


def test_sgd_recipe_and_cosine_decay_over_the_whole_run(mnist_root, tmp_path):
    model = ImageClassifier(MnistCNN(), lr=0.1, final_lr_ratio=0.1)
    dm = MNISTDataModule(root=str(mnist_root), download=False, batch_size=64, num_workers=0, val_size=128)
    trainer = Trainer(
        max_epochs=2,
        limit_train_batches=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, dm)
    optimizer = trainer.optimizers[0]
    assert type(optimizer).__name__ == "SGD"
    assert optimizer.defaults["momentum"] == 0.9 and optimizer.defaults["weight_decay"] == 5e-3
    assert optimizer.defaults["lr"] == pytest.approx(0.1)
    # 6 steps, one scheduler step each: the lr ends at final_lr_ratio x lr.
    assert trainer.global_step == 6
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.01)
    assert {"train/loss", "val/loss", "val/acc"} <= trainer.callback_metrics.keys()
