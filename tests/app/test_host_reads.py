"""A training step as users run it reads no tensor value on the host (on a GPU: a sync that stalls
the CPU until the device is done) except at the steps Lightning logs: there, the model's one read
copies the logged loss and the NaN stop's state together, after the optimizer step."""

import json

from helpers.cli import callback, check, run_app


def test_values_are_read_at_logging_steps_only_and_the_device_once_there(mnist_root, tmp_path):
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
    read_at = {int(batch): names for batch, names in json.loads(reads.read_text()).items()}
    logged, epoch_end = (
        {19, 39, 59, 79},
        99,
    )  # the epoch's end (validation, checkpoint) counts as its last batch
    assert set(read_at) - {epoch_end} == logged  # not at the bar's redraw at 49, nor between
    for batch in logged:
        # tolist: the model's one copy from the device (the loss and the NaN stop's state); the other
        # reads are of the host tensor it logged: Lightning's logger, and the bar taking the new value.
        assert read_at[batch].count("tolist") == 1, read_at[batch]
        assert "__float__" in read_at[batch], read_at[batch]
