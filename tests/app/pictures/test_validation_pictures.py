"""ValidationPictures in real training runs: PNG files, logger images, confusion matrix counts."""

import io
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers.cli import callback, run_app, run_folder
from lightning import Callback, LightningModule, Trainer
from matplotlib import colormaps
from PIL import Image

from app.distributed.job import DistributedJob
from app.pictures import ValidationPictures
from app.pictures import callback as validation_pictures
from app.pictures.drawing import CELL, GAP, TEXT_UP_TO, TITLE, matrix_picture, title
from data import MNISTDataModule
from models import ImageClassifier, MnistCNN

DRAW = validation_pictures.draw
VAL_SIZE = 101  # odd: under 2 processes the shards differ in size (51 and 50), none padded


class NamedMNIST(MNISTDataModule):
    class_names = tuple(f"digit{i}" for i in range(10))


def fit(
    mnist_root: Path, tmp_path: Path, callback: ValidationPictures, data=MNISTDataModule, **options
) -> Trainer:
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
        # DistributedJob as in the CLI's runs: a spawned rank whose gloo group outlives it can abort at exit.
        "callbacks": [callback, DistributedJob()],
        **options,
    }
    ckpt_path = settings.pop("ckpt_path", None)
    trainer = Trainer(**settings)
    trainer.fit(ImageClassifier(MnistCNN()), dm, ckpt_path=ckpt_path)
    return trainer


def test_each_epochs_own_train_loss_is_drawn_when_epochs_are_shorter_than_the_log_interval(
    mnist_root, tmp_path
):
    # 2 steps an epoch, a log every 50: the model logs each epoch's last loss after the epoch's hooks.
    pictures = ValidationPictures()
    trainer = fit(mnist_root, tmp_path, pictures, max_epochs=3, log_every_n_steps=50)
    assert sorted(pictures.history) == [0, 1, 2]
    losses = [pictures.history[epoch]["train/loss"] for epoch in range(3)]
    assert losses[2] == pytest.approx(float(trainer.callback_metrics["train/loss"]))  # the last logged
    assert len(set(losses)) == 3


def assert_picture(path: Path, min_side: int = 200) -> None:
    """``path`` is a PNG with something drawn on it."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert min(image.size) >= min_side, image.size
        assert np.asarray(image.convert("L"), dtype=float).var() > 0, f"{path} is blank"


def test_fit_writes_curves_and_confusion_matrix(mnist_root, tmp_path):
    pictures = ValidationPictures()
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
    pictures = ValidationPictures(samples=5)
    trainer = fit(mnist_root, tmp_path, pictures, data=NamedMNIST)
    images, preds, labels = pictures.shown
    assert len(images) == 5
    names = [f"digit{i}" for i in range(10)]
    for pred, label in zip(preds.tolist(), labels.tolist(), strict=True):
        expected = f"pred digit{pred}\ntrue digit{label}"
        assert title(pred, label, names) == (expected if pred == label else f"✗ {expected}")
    picture = np.asarray(pictures.samples_picture(trainer, images, preds, labels))
    assert_titles_fit(picture, (preds != labels).tolist(), columns=5, size=28)


def cells(picture: np.ndarray, count: int, columns: int, size: int) -> list[tuple[tuple, tuple]]:
    """Where each sample's title band and image lie in the grid ``picture``: (rows, columns) slices."""
    scale = CELL / (size + GAP)
    band = math.ceil(TITLE / scale)
    rows = math.ceil(count / columns)
    assert picture.shape[:2] == (
        round((rows * (band + size + GAP) + GAP) * scale),
        round((columns * (size + GAP) + GAP) * scale),
    )
    places = []
    for i in range(count):
        row, col = divmod(i, columns)
        x, y = GAP + col * (size + GAP), GAP + row * (band + size + GAP)  # in grid pixels
        left, right = math.ceil(x * scale), math.floor((x + size) * scale)
        top, middle, bottom = (round(v * scale) for v in (y, y + band, y + band + size))
        places.append(
            (
                (slice(top, middle), slice(left, right)),
                (slice(middle + 1, bottom - 1), slice(left + 1, right - 1)),
            )
        )
    return places


def assert_titles_fit(picture: np.ndarray, wrong: list[bool], columns: int, size: int) -> None:
    """Each title lies in the white band above its own image, red where the prediction is wrong."""
    ink = (picture < 200).any(axis=2)
    red = (picture[..., 0] > 150) & (picture[..., 1] < 100) & (picture[..., 2] < 100)
    images = np.zeros_like(ink)
    for (band, image), is_wrong in zip(cells(picture, len(wrong), columns, size), wrong, strict=True):
        rows, cols = np.nonzero(ink[band])
        assert len(rows), "a title is missing"
        (height, width) = ink[band].shape
        # Within its band and column, and centred there (the glyphs' ink, not their boxes: a pixel or two)
        assert rows.min() > 0 and rows.max() < height - 1, "a title touches its image"
        assert abs(rows.min() - (height - 1 - rows.max())) <= 3, "a title is not centred above its image"
        assert cols.min() > 0 and cols.max() < width - 1, "a title spills into the next column"
        assert abs(cols.min() - (width - 1 - cols.max())) <= 3, "a title is not centred on its image"
        assert red[band].sum() > 20 if is_wrong else not red[band].any()
        ink[band] = False
        rows, cols = image  # the image's inside; its edge pixels may be a blend of it and the gap
        images[rows.start - 2 : rows.stop + 2, cols.start - 2 : cols.stop + 2] = True
    assert not (ink & ~images).any(), "ink outside the titles and the images"


def test_grey_grid_renders_with_its_aspect_and_its_pixels():
    mean, std = (0.1307,), (0.3081,)
    images = torch.full((32, 1, 28, 28), (0.5 - mean[0]) / std[0])  # mid grey once unnormalized
    trainer = SimpleNamespace(datamodule=SimpleNamespace(class_names=None, mean=mean, std=std))
    picture = ValidationPictures().samples_picture(
        trainer, images, torch.zeros(32, dtype=int), torch.arange(32) % 10
    )
    pixels = np.asarray(picture)
    assert pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[2] == 3
    for _, image in cells(pixels, 32, columns=8, size=28):  # the whole of each image, untouched by titles
        assert np.abs(pixels[image].astype(int) - 128).max() <= 1 and len(np.unique(pixels[image])) == 1
    assert (pixels[0, 0] == 255).all()
    assert_titles_fit(pixels, [i % 10 != 0 for i in range(32)], columns=8, size=28)


def test_large_colour_images_get_a_band_tall_enough_for_their_titles():
    images = torch.rand(3, 3, 224, 224)
    trainer = SimpleNamespace(datamodule=SimpleNamespace(class_names=["cat", "dog"], mean=None, std=None))
    picture = ValidationPictures().samples_picture(
        trainer, images, torch.tensor([0, 1, 0]), torch.tensor([0, 1, 1])
    )
    assert_titles_fit(np.asarray(picture), [False, False, True], columns=3, size=224)


def test_matrix_cells_are_coloured_by_count_and_counted_only_when_few():
    viridis = np.asarray(colormaps["viridis"]([0.0, 1.0])[:, :3] * 255).round().astype(np.uint8)

    def shaded(picture: Image.Image, colour: np.ndarray) -> int:
        return int((np.asarray(picture) == colour).all(axis=2).sum())

    few = matrix_picture(np.array([[7, 0, 0], [0, 7, 1], [0, 2, 7]]), 0, ["a", "b", "c"])
    cell = 70  # pixels: the matrix is at most 1,400 wide
    # The 3 cells of the highest count and the 4 of none, less their written counts.
    assert 0.9 * 3 * cell**2 < shaded(few, viridis[1]) < 3 * cell**2
    assert 0.9 * 4 * cell**2 < shaded(few, viridis[0]) < 4 * cell**2
    many = np.zeros((TEXT_UP_TO + 1, TEXT_UP_TO + 1), dtype=int)
    np.fill_diagonal(many, 5)
    picture = matrix_picture(many, 0, [])
    cell = 1400 // (TEXT_UP_TO + 1)
    assert shaded(picture, viridis[1]) == (TEXT_UP_TO + 1) * cell**2  # no text over the cells


def test_no_samples_and_no_plots_outside_fit(mnist_root, tmp_path):
    pictures = ValidationPictures(samples=0)
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
    fit(mnist_root, tmp_path, ValidationPictures(), logger=logger)
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0})
    events.Reload()
    assert {"val/confusion_matrix", "val/samples"} <= set(events.Tags()["images"])
    for tag in ("val/confusion_matrix", "val/samples"):
        (image,) = events.Images(tag)  # one validation: the sanity check's is not logged
        assert min(image.width, image.height) >= 200


def logged_images(folder: Path) -> dict[str, list[tuple[int, np.ndarray]]]:
    """The images of the TensorBoard event files under ``folder``: tag -> (step, RGB pixels)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events_file,) = folder.rglob("events.out.tfevents.*")
    events = EventAccumulator(str(events_file), size_guidance={"images": 0})
    events.Reload()
    return {
        tag: [
            (e.step, np.asarray(Image.open(io.BytesIO(e.encoded_image_string)).convert("RGB")))
            for e in events.Images(tag)
        ]
        for tag in events.Tags()["images"]
    }


def slow_draw(*args):
    """The drawing thread's work, a second later: the run goes on (or ends) meanwhile."""
    time.sleep(1)
    return DRAW(*args)


def test_logged_pictures_are_those_drawn_in_the_training_thread(mnist_root, tmp_path):
    from lightning.pytorch.loggers import TensorBoardLogger

    pictures = ValidationPictures(samples=5)
    trainer = fit(
        mnist_root, tmp_path, pictures, data=NamedMNIST, logger=TensorBoardLogger(tmp_path, name="tb")
    )
    images = logged_images(tmp_path / "tb")
    expected = {
        "val/confusion_matrix": np.asarray(pictures.confusion_picture(trainer)),
        "val/samples": np.asarray(pictures.samples_picture(trainer, *pictures.shown)),
    }
    assert images.keys() == expected.keys()
    for tag, pixels in expected.items():
        ((step, logged),) = images[tag]
        assert step == trainer.global_step
        assert np.array_equal(logged, pixels), tag


class FitEnd(Callback):
    """Placed before ValidationPictures: marks the fit's end before the pictures' own hook waits for them."""

    def __init__(self) -> None:
        self.reached = threading.Event()

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.reached.set()


def test_fit_ends_once_the_last_validations_pictures_are_logged(mnist_root, tmp_path, monkeypatch):
    from lightning.pytorch.loggers import TensorBoardLogger

    end = FitEnd()

    def draw_after_the_fit(*args):
        """No picture is drawn before the fit's end: both epochs' are still being drawn when it comes."""
        assert end.reached.wait(timeout=120), "the fit never ended"
        return DRAW(*args)

    monkeypatch.setattr(validation_pictures, "draw", draw_after_the_fit)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    pictures = ValidationPictures()
    callbacks = [end, pictures, DistributedJob()]
    logger = TensorBoardLogger(tmp_path, name="tb")
    trainer = fit(mnist_root, tmp_path, pictures, max_epochs=2, logger=logger, callbacks=callbacks)
    images = logged_images(tmp_path / "tb")
    for tag in ("val/confusion_matrix", "val/samples"):
        assert [step for step, _ in images[tag]] == [2, 4]  # each epoch's validation, in order
    last_matrix = np.asarray(pictures.confusion_picture(trainer))
    assert np.array_equal(images["val/confusion_matrix"][-1][1], last_matrix)
    with Image.open(tmp_path / "plots" / "confusion_matrix.png") as saved:
        assert np.array_equal(np.asarray(saved.convert("RGB")), last_matrix)
    # The drawing thread ended with the fit, and its files went with it.
    assert pictures.painter is None and not pictures.drawing and not any(scratch.iterdir())


def test_sigterm_waits_for_the_pictures_being_drawn(mnist_root, tmp_path, monkeypatch):
    """Lightning's SIGTERM stop comes while epoch 0's pictures are still being drawn: they are logged.
    The stop comes one training step after that validation (a quarter of a second on a busy 2-core
    machine), within the draw's second."""
    monkeypatch.setattr(validation_pictures, "draw", slow_draw)
    args = [f"--data.root={mnist_root}", "--trainer.max_epochs=3", "--trainer.logger=TensorBoardLogger"]
    stopped = run_app("fit", *args, callback("helpers.stops.SigtermAt", step=5), cwd=tmp_path)
    assert stopped.returncode == 143, stopped.stderr[-2000:]
    images = logged_images(run_folder(tmp_path))
    for tag in ("val/confusion_matrix", "val/samples"):
        ((step, pixels),) = images[tag]  # epoch 0's validation, after step 4
        assert step == 4 and pixels.var() > 0


@pytest.mark.part("app.wandb_logger")
def test_wandb_offline_run_gets_the_images(mnist_root, tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from lightning.pytorch.loggers import WandbLogger

    for key, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(key, value)
    try:
        fit(mnist_root, tmp_path, ValidationPictures(), logger=WandbLogger(save_dir=tmp_path, offline=True))
    finally:
        wandb.finish()
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    media = sorted(p.name for p in (run / "files" / "media" / "images").rglob("*.png"))
    # One validation (the sanity check's is not logged): one picture of each.
    assert [name.split("_")[0] for name in media] == ["confusion", "samples"], media
    for path in (run / "files" / "media" / "images").rglob("*.png"):
        assert_picture(path)


def test_resumed_fit_keeps_the_earlier_epochs_curves(mnist_root, tmp_path):
    first = fit(mnist_root, tmp_path, ValidationPictures())
    first.save_checkpoint(tmp_path / "epoch0.ckpt")
    pictures = ValidationPictures()
    fit(mnist_root, tmp_path, pictures, max_epochs=2, ckpt_path=tmp_path / "epoch0.ckpt")
    assert sorted(pictures.history) == [0, 1]


def test_cli_fit_writes_the_plots_into_the_run_folder(trained_run):
    (curves,) = (trained_run / "runs").rglob("plots/curves.png")
    assert_picture(curves)
    assert_picture(curves.with_name("confusion_matrix.png"))


class SavingPictures(ValidationPictures):
    """Also saves each rank's last confusion matrix, which ddp_spawn does not bring back."""

    def on_fit_end(self, trainer, pl_module):
        super().on_fit_end(trainer, pl_module)
        torch.save(self.matrix, Path(trainer.default_root_dir) / f"matrix-rank{trainer.global_rank}.pt")


@pytest.mark.full
@pytest.mark.distributed
def test_confusion_matrix_counts_the_samples_of_every_rank(mnist_root, tmp_path):
    fit(mnist_root, tmp_path, SavingPictures(), accelerator="cpu", devices=2, strategy="ddp_spawn")
    for rank in (0, 1):
        matrix = torch.load(tmp_path / f"matrix-rank{rank}.pt", weights_only=True)
        assert matrix.sum() == VAL_SIZE
    assert_picture(tmp_path / "plots" / "confusion_matrix.png")


def torch_calls_in(thread_prefix: str, calls: list[str]):
    """A profile function that records the torch functions called in threads named ``thread_prefix*``."""

    def profile(frame, event, arg):
        if not threading.current_thread().name.startswith(thread_prefix):
            return
        if event == "call" and f"{os.sep}torch{os.sep}" in frame.f_code.co_filename:
            calls.append(frame.f_code.co_qualname)
        elif event == "c_call":
            module = getattr(arg, "__module__", None) or ""
            if module.startswith("torch") or isinstance(getattr(arg, "__self__", None), torch.Tensor):
                calls.append(arg.__qualname__)

    return profile


def test_the_drawing_thread_calls_no_torch(mnist_root, tmp_path):
    """A torch op in the drawing thread would start an OpenMP team of its own beside training's, and
    with more OpenMP threads than cores training's epochs ran slower (see ValidationPictures)."""
    from lightning.pytorch.loggers import TensorBoardLogger

    calls: list[str] = []
    threading.setprofile(torch_calls_in("validation-pictures", calls))
    try:
        control = threading.Thread(target=lambda: torch.ones(3).mul(2), name="validation-pictures-control")
        control.start()
        control.join()
        assert calls, "the profile misses torch calls"
        calls.clear()
        fit(mnist_root, tmp_path, ValidationPictures(), logger=TensorBoardLogger(tmp_path, name="tb"))
    finally:
        threading.setprofile(None)
    assert logged_images(tmp_path / "tb").keys() == {"val/confusion_matrix", "val/samples"}
    assert not calls, sorted(set(calls))[:20]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a priority per thread is Linux's")
def test_the_drawing_thread_yields_to_training(mnist_root, tmp_path, monkeypatch):
    """Drawn at the lowest priority, so that the pictures do not take a core from training's threads."""
    from lightning.pytorch.loggers import TensorBoardLogger

    priorities = []

    def draw(*args):
        priorities.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return DRAW(*args)

    monkeypatch.setattr(validation_pictures, "draw", draw)
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    fit(mnist_root, tmp_path, ValidationPictures(), logger=TensorBoardLogger(tmp_path, name="tb"))
    assert priorities == [19] and os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
