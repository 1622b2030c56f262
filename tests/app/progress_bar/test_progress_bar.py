"""The CLI's progress bar redraws (and asks for the metrics) every ``refresh_rate`` steps only, and
shows the loss as last logged (as the loggers got it; without one, read at logging steps only:
tests/app/test_host_reads.py)."""

import pytest
from lightning import Trainer
from lightning.pytorch.callbacks import RichProgressBar
from lightning.pytorch.loggers import CSVLogger

from app.progress_bar import ThrottledRichProgressBar
from data import MNISTDataModule
from models import ImageClassifier, MnistCNN


def counting(bar_class: type[RichProgressBar]) -> RichProgressBar:
    class Counting(bar_class):
        reads, completed, shown = 0, 0, {}

        def get_metrics(self, trainer, pl_module):
            self.reads += trainer.training
            self.shown = super().get_metrics(trainer, pl_module)
            return self.shown

        def on_train_epoch_end(self, trainer, pl_module):
            super().on_train_epoch_end(trainer, pl_module)
            self.completed = self.progress.tasks[self.train_progress_bar_id].completed

    return Counting(refresh_rate=5)


def fit(bar: RichProgressBar, mnist_root, tmp_path, logger=False, **limits) -> Trainer:
    """A short fit of the template's model on MNIST with ``bar`` as the only callback."""
    dm = MNISTDataModule(root=str(mnist_root), download=False, batch_size=16, num_workers=0, val_size=0.2)
    trainer = Trainer(
        **limits,
        limit_val_batches=0,
        logger=logger,
        enable_checkpointing=False,
        enable_model_summary=False,
        callbacks=[bar],
        default_root_dir=tmp_path,
    )
    trainer.fit(ImageClassifier(MnistCNN()), dm)
    return trainer


@pytest.mark.parametrize(("bar_class", "most_reads"), [(ThrottledRichProgressBar, 5), (RichProgressBar, 21)])
def test_metrics_are_asked_for_at_redraws_only(bar_class, most_reads, mnist_root, tmp_path):
    bar = counting(bar_class)
    fit(bar, mnist_root, tmp_path, max_epochs=1, limit_train_batches=20)
    assert bar.completed == 20  # the bar still ends full
    # Steps 5, 10, 15, 20 and the epoch end; Lightning's own bar reads at every one of the 20 steps.
    assert bar.reads == most_reads


def test_the_loss_is_shown_as_last_logged(mnist_root, tmp_path):
    bar = counting(ThrottledRichProgressBar)
    trainer = fit(bar, mnist_root, tmp_path, max_steps=10, log_every_n_steps=5)
    # Logged without prog_bar=True (which Lightning would read at every step), shown by the bar.
    assert "train/loss" not in trainer.progress_bar_metrics
    assert bar.shown["train/loss"] == float(trainer.callback_metrics["train/loss"])


def test_with_a_logger_the_bar_shows_what_lightning_logged(mnist_root, tmp_path):
    bar = counting(ThrottledRichProgressBar)
    logger = CSVLogger(tmp_path)
    trainer = fit(bar, mnist_root, tmp_path, logger=logger, max_steps=10, log_every_n_steps=5)
    assert bar.shown["train/loss"] == trainer.logged_metrics["train/loss"]  # the floats the loggers got
    assert bar.values == {}  # nothing read of its own
