"""A training step as users run it reads no device value on the host (on a GPU: a sync that stalls the
CPU until the device is done) except at the steps Lightning logs, and waits for the device once there:
counted on the CPU by marking the tensors a GPU would hold (``helpers/host_reads.py``)."""

import importlib.util
import json
from pathlib import Path

import pytest
from helpers.cli import callback, check, run_app, run_process
from helpers.host_reads import HostReads
from lightning import Callback, Trainer
from lightning.pytorch.loggers import CSVLogger
from torch import nn

from app.callbacks.last_checkpoint import LastCheckpoint
from data import MNISTDataModule
from models import ImageClassifier, MnistCNN


class LogsAccuracy(ImageClassifier):
    """A training step as Lightning's docs write it, logging one more value than the template's."""

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.log("train/loss", loss)
        self.log("train/acc", (logits.argmax(dim=1) == y).float().mean())
        return loss


def reads_of(tmp_path, *args: str, process: bool = False, rank: int = 0) -> dict[int, dict]:
    """The reads of each training batch of ``rank`` in a 100-step fit logging every 20 steps."""
    reads = tmp_path / "reads.json"
    args = (
        "--data.batch_size=4",
        "--trainer.limit_train_batches=100",
        "--trainer.limit_val_batches=2",
        "--trainer.log_every_n_steps=20",
        "--trainer.enable_progress_bar=true",  # the default bar, redrawn every 50 steps
        callback("helpers.host_reads.HostReads", file=str(reads)),
        *args,
    )
    check((run_process if process else run_app)("fit", *args, cwd=tmp_path / "fit"))
    return batches_in(reads)


def batches_in(reads: Path) -> dict[int, dict]:
    return {int(batch): counts for batch, counts in json.loads(reads.read_text()).items()}


def assert_logging_steps_only(batches: dict[int, dict], values: int) -> None:
    """No read between logging steps; at each, one wait for the device and ``values`` reads: Lightning's
    read of each logged value for the loggers (the first waits, the others find the device idle); the bar
    shows what they read."""
    epoch_end = max(batches)  # the epoch's end (validation, checkpoint) counts as its last batch
    logged = {batch for batch in batches if batches[batch]["step"] % 20 == 0} - {epoch_end}
    read = {batch for batch, counts in batches.items() if counts["reads"]}
    assert read - {epoch_end} == logged, batches  # not at the bar's redraw at 49, nor between
    for batch in logged:
        assert batches[batch]["waits"] == 1, batches[batch]
        assert len(batches[batch]["reads"]) == values, batches[batch]


def test_values_are_read_at_logging_steps_only_and_the_device_waited_for_once(mnist_root, tmp_path):
    assert_logging_steps_only(reads_of(tmp_path, f"--data.root={mnist_root}"), values=1)


def optional_callbacks() -> list[Callback]:
    """The template's progress bar and NaN stop, those of these optional parts the project has."""
    found: list[Callback] = []
    if importlib.util.find_spec("app.progress_bar") is not None:
        from app.progress_bar import ThrottledRichProgressBar

        found.append(ThrottledRichProgressBar(refresh_rate=50))
    if importlib.util.find_spec("app.nan_stop") is not None:
        from app.nan_stop import StopOnNonFiniteWeights

        found.append(StopOnNonFiniteWeights())
    return found


def fit_with_callbacks(model: ImageClassifier, mnist_root, tmp_path, *more: Callback) -> dict[int, dict]:
    """The reads of each batch of a 100-step fit of ``model`` with the template's callbacks (and ``more``)."""
    dm = MNISTDataModule(root=str(mnist_root), download=False, batch_size=4, num_workers=0, val_size=0.2)
    reads = tmp_path / "reads.json"
    callbacks = [*optional_callbacks(), LastCheckpoint()]
    trainer = Trainer(
        max_epochs=1,
        limit_train_batches=100,
        limit_val_batches=2,
        log_every_n_steps=20,
        logger=CSVLogger(tmp_path),
        callbacks=[*callbacks, *more, HostReads(str(reads))],
        default_root_dir=tmp_path,
        enable_model_summary=False,
    )
    trainer.fit(model, dm)
    return batches_in(reads)


def test_a_value_the_model_adds_is_read_at_logging_steps_only_too(mnist_root, tmp_path):
    """The template's callbacks around a model of the user's own: no code of the model's serves them."""
    assert_logging_steps_only(fit_with_callbacks(LogsAccuracy(MnistCNN()), mnist_root, tmp_path), values=2)
    assert "train/acc" in (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").read_text()


class ReadsEachLoss(Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        float(outputs["loss"])


def test_a_read_between_logging_steps_is_caught(mnist_root, tmp_path):
    batches = fit_with_callbacks(ImageClassifier(MnistCNN()), mnist_root, tmp_path, ReadsEachLoss())
    with pytest.raises(AssertionError):
        assert_logging_steps_only(batches, values=1)
    assert batches[10]["reads"] == ["__float__"] and batches[10]["waits"] == 1


@pytest.mark.full
@pytest.mark.distributed
def test_under_ddp_the_sigterm_agreement_reads_no_device_value(mnist_root, tmp_path):
    ddp = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]
    assert_logging_steps_only(reads_of(tmp_path, f"--data.root={mnist_root}", *ddp, process=True), values=1)
    assert_logging_steps_only(batches_in(tmp_path / "reads.rank1.json"), values=1)
