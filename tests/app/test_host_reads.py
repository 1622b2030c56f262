"""A training step as users run it reads no tensor value on the host (on a GPU: a sync that stalls
the CPU until the device is done) except where something is logged or shown."""

import json

from helpers.cli import callback, check, run_app


def test_values_are_read_at_log_steps_and_redraws_only(mnist_root, tmp_path):
    reads = tmp_path / "reads.json"
    args = [
        f"--data.root={mnist_root}",
        "--data.batch_size=4",
        "--trainer.limit_train_batches=100",
        "--trainer.limit_val_batches=2",
        "--trainer.log_every_n_steps=20",
        "--trainer.enable_progress_bar=true",  # the default bar, redrawn every 50 steps
        callback("helpers.host_reads.HostReads", file=str(reads)),
    ]
    check(run_app("fit", *args, cwd=tmp_path / "fit"))
    read_at = {int(batch) for batch in json.loads(reads.read_text())}
    logged, redrawn, epoch_end = {19, 39, 59, 79, 99}, {49, 99}, {99}
    assert read_at <= logged | redrawn | epoch_end
    assert 49 in read_at  # the bar still reads the loss it shows
