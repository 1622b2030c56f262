"""ImageClassifier in a real Trainer: the recipe's optimizer and its lr schedule."""

import functools
import math

import pytest
import torch
from lightning import Callback, Trainer

from data import MNISTDataModule
from models import ImageClassifier, MnistCNN
from models.schedules import WarmupCosineLR


def sgd(**options) -> functools.partial:
    """What ``--model.optimizer SGD --model.optimizer.X ...`` gives the model."""
    return functools.partial(torch.optim.SGD, **{"momentum": 0.9, "weight_decay": 5e-3, **options})


def cosine(**options) -> functools.partial:
    return functools.partial(WarmupCosineLR, **options)


def quiet_trainer(tmp_path, **options) -> Trainer:
    """A real Trainer without logger, checkpoints or console output."""
    quiet = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False}
    return Trainer(**quiet, enable_model_summary=False, default_root_dir=tmp_path, **options)


def test_sgd_recipe_and_cosine_decay_over_the_whole_run(mnist_root, tmp_path):
    model = ImageClassifier(MnistCNN(), optimizer=sgd(lr=0.1), scheduler=cosine(final_lr_ratio=0.1))
    dm = MNISTDataModule(root=str(mnist_root), download=False, batch_size=64, num_workers=0, val_size=128)
    trainer = quiet_trainer(tmp_path, max_epochs=2, limit_train_batches=3)
    trainer.fit(model, dm)
    optimizer = trainer.optimizers[0]
    assert type(optimizer).__name__ == "SGD"
    assert optimizer.defaults["momentum"] == 0.9 and optimizer.defaults["weight_decay"] == 5e-3
    assert optimizer.defaults["lr"] == pytest.approx(0.1)
    # 6 steps, one scheduler step each: the lr ends at final_lr_ratio x lr.
    assert trainer.global_step == 6
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.01)
    assert {"train/loss", "val/loss", "val/acc"} <= trainer.callback_metrics.keys()


class LearningRates(Callback):
    """Records the lr each training step ran with."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.seen.append(trainer.optimizers[0].param_groups[0]["lr"])


def test_linear_warmup_then_cosine_to_the_final_lr(mnist_root, tmp_path):
    model = ImageClassifier(
        MnistCNN(),
        optimizer=sgd(lr=0.1, nesterov=True),
        scheduler=cosine(warmup_ratio=0.25, final_lr_ratio=0),
    )
    dm = MNISTDataModule(root=str(mnist_root), download=False, batch_size=64, num_workers=0, val_size=128)
    rates = LearningRates()
    trainer = quiet_trainer(
        tmp_path, max_epochs=4, limit_train_batches=3, limit_val_batches=0, callbacks=[rates]
    )
    trainer.fit(model, dm)
    assert trainer.optimizers[0].defaults["nesterov"] is True
    # 12 steps: 3 of warmup on a line up to 0.1, then 9 along a cosine from 0.1 towards 0.
    assert rates.seen[:4] == pytest.approx([0.025, 0.05, 0.075, 0.1])
    assert all(a > b for a, b in zip(rates.seen[3:], rates.seen[4:], strict=False))
    assert rates.seen[-1] == pytest.approx(0.05 * (1 + math.cos(math.pi * 8 / 9)))


def test_channels_last_changes_memory_order_not_results():
    torch.manual_seed(0)
    plain, nhwc = ImageClassifier(MnistCNN()), ImageClassifier(MnistCNN(), channels_last=True)
    nhwc.load_state_dict(plain.state_dict())
    conv = nhwc.net.features[3].weight  # 16 input channels: the two orders differ
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    x = torch.randn(4, 1, 28, 28)
    assert torch.allclose(plain(x), nhwc(x), atol=1e-5)


def test_compile_keeps_checkpoint_keys():
    keys = ImageClassifier(MnistCNN()).state_dict().keys()
    compiled = ImageClassifier(MnistCNN(), compile=True)
    assert compiled.net._compiled_call_impl is not None  # forward goes through torch.compile
    assert compiled.state_dict().keys() == keys


@pytest.mark.parametrize(
    ("scaling", "factors"), [("linear", [1, 4, 64]), ("sqrt", [1, 2, 8]), ("none", [1, 1, 1])]
)
def test_lr_grows_with_the_world_size_as_lr_scaling_says(scaling, factors):
    """Worlds of 1, 4 and 64 processes; a real 2-process run is in app/distributed/test_distributed.py."""
    model = ImageClassifier(MnistCNN(), optimizer=sgd(lr=0.01), lr_scaling=scaling)
    assert [model.scaled_lr(world) for world in (1, 4, 64)] == pytest.approx([0.01 * f for f in factors])
