"""app.pictures.Pictures in real training runs: PNG files, logger images, confusion matrix counts."""

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import check, run_app
from lightning import Trainer
from PIL import Image

from app.pictures import Pictures
from data import MNISTDataModule
from models import ImageClassifier, MnistCNN

VAL_SIZE = 101  # odd: under 2 processes the shards differ in size (51 and 50), none padded


class NamedMNIST(MNISTDataModule):
    class_names = tuple(f"digit{i}" for i in range(10))


def fit(mnist_root: Path, tmp_path: Path, callback: Pictures, data=MNISTDataModule, **options) -> Trainer:
    """A tiny fit of MnistCNN on the fixture's MNIST files, with ``callback``."""
    dm = data(root=str(mnist_root), download=False, batch_size=32, num_workers=0, val_size=VAL_SIZE)
    settings = {
        "max_epochs": 1,
        "limit_train_batches": 2,
        "log_every_n_steps": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "default_root_dir": tmp_path,
        "callbacks": [callback],
        **options,
    }
    ckpt_path = settings.pop("ckpt_path", None)
    trainer = Trainer(**settings)
    trainer.fit(ImageClassifier(MnistCNN()), dm, ckpt_path=ckpt_path)
    return trainer


def assert_picture(path: Path, min_side: int = 200) -> None:
    """``path`` is a PNG with something drawn on it."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert min(image.size) >= min_side, image.size
        assert np.asarray(image.convert("L"), dtype=float).var() > 0, f"{path} is blank"


def test_fit_writes_curves_and_confusion_matrix(mnist_root, tmp_path):
    pictures = Pictures()
    trainer = fit(mnist_root, tmp_path, pictures, max_epochs=2)
    assert_picture(tmp_path / "plots" / "curves.png")
    assert_picture(tmp_path / "plots" / "confusion_matrix.png")
    # Each epoch's val metrics as logged; the sanity check's validation left no trace.
    assert sorted(pictures.history) == [0, 1]
    for point in pictures.history.values():
        assert point.keys() == {"train/loss", "val/loss", "val/acc"}
    assert pictures.history[1]["val/acc"] == pytest.approx(float(trainer.callback_metrics["val/acc"]))
    assert pictures.matrix.shape == (10, 10)
    assert pictures.matrix.sum() == VAL_SIZE
    correct = pictures.matrix.diagonal().sum() / VAL_SIZE
    assert correct.item() == pytest.approx(pictures.history[1]["val/acc"], abs=1e-6)


def test_samples_are_titled_with_class_names_and_wrong_ones_marked(mnist_root, tmp_path):
    pictures = Pictures(samples=5)
    trainer = fit(mnist_root, tmp_path, pictures, data=NamedMNIST)
    images, preds, labels = pictures.shown
    assert len(images) == 5
    fig = pictures.samples_figure(trainer, images, preds, labels)
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 5
    for ax, pred, label in zip(drawn, preds.tolist(), labels.tolist(), strict=True):
        title = ax.title
        assert f"pred digit{pred}" in title.get_text() and f"true digit{label}" in title.get_text()
        assert (title.get_color() == "red") == (pred != label)


def test_no_samples_and_no_plots_outside_fit(mnist_root, tmp_path):
    pictures = Pictures(samples=0)
    trainer = fit(mnist_root, tmp_path, pictures, max_epochs=1)
    assert pictures.shown is None
    assert (tmp_path / "plots" / "curves.png").is_file()
    (tmp_path / "plots" / "curves.png").unlink()
    trainer.validate(trainer.lightning_module, trainer.datamodule, verbose=False)
    assert pictures.matrix.sum() == VAL_SIZE  # reset between validations: not 2 x VAL_SIZE
    assert not (tmp_path / "plots" / "curves.png").exists()


def test_tensorboard_run_gets_the_figures(mnist_root, tmp_path):
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path, name="tb")
    fit(mnist_root, tmp_path, Pictures(), logger=logger)
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0})
    events.Reload()
    assert {"val/confusion_matrix", "val/samples"} <= set(events.Tags()["images"])
    for tag in ("val/confusion_matrix", "val/samples"):
        (image,) = events.Images(tag)  # one validation: the sanity check's is not logged
        assert min(image.width, image.height) >= 200


def test_wandb_offline_run_gets_the_images(mnist_root, tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from lightning.pytorch.loggers import WandbLogger

    for key, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(key, value)
    try:
        fit(mnist_root, tmp_path, Pictures(), logger=WandbLogger(save_dir=tmp_path, offline=True))
    finally:
        wandb.finish()
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    media = sorted(p.name for p in (run / "files" / "media" / "images").rglob("*.png"))
    # One validation (the sanity check's is not logged): one picture of each.
    assert [name.split("_")[0] for name in media] == ["confusion", "samples"], media
    for path in (run / "files" / "media" / "images").rglob("*.png"):
        assert_picture(path)


def test_resumed_fit_keeps_the_earlier_epochs_curves(mnist_root, tmp_path):
    first = fit(mnist_root, tmp_path, Pictures())
    first.save_checkpoint(tmp_path / "epoch0.ckpt")
    pictures = Pictures()
    fit(mnist_root, tmp_path, pictures, max_epochs=2, ckpt_path=tmp_path / "epoch0.ckpt")
    assert sorted(pictures.history) == [0, 1]


def test_cli_fit_writes_the_plots_into_the_run_folder(mnist_root, tmp_path):
    check(run_app("fit", f"--data.root={mnist_root}", "--test_after_fit=false", cwd=tmp_path))
    (curves,) = (tmp_path / "runs").rglob("plots/curves.png")
    assert_picture(curves)
    assert_picture(curves.with_name("confusion_matrix.png"))


class SavingPictures(Pictures):
    """Also saves each rank's last confusion matrix, which ddp_spawn does not bring back."""

    def on_fit_end(self, trainer, pl_module):
        super().on_fit_end(trainer, pl_module)
        torch.save(self.matrix, Path(trainer.default_root_dir) / f"matrix-rank{trainer.global_rank}.pt")


@pytest.mark.distributed
def test_confusion_matrix_counts_the_samples_of_every_rank(mnist_root, tmp_path):
    fit(mnist_root, tmp_path, SavingPictures(), accelerator="cpu", devices=2, strategy="ddp_spawn")
    for rank in (0, 1):
        matrix = torch.load(tmp_path / f"matrix-rank{rank}.pt", weights_only=True)
        assert matrix.sum() == VAL_SIZE
    assert_picture(tmp_path / "plots" / "confusion_matrix.png")
