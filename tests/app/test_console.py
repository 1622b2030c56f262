"""The console of a normal run: the start and end lines, images/s, and none of the known noise."""

import pytest
from helpers.cli import run_process

# Lines earlier versions printed that a user had to learn to ignore. Lightning's and wandb's own lines
# (Lightning's litlogger advert, the metric modules its summary lists, wandb's "anonymous setting") are
# theirs to print: the CLI filters no library's output.
NOISE = [
    "`weights_only` was not set",
    "Trainer already configured with model summary callbacks",
    "Total FLOPs: 0",
    "0.00it/s",
    "\x1b[",  # terminal colour codes in a log file
]


@pytest.mark.part("app.wandb_logger")
@pytest.mark.full
def test_a_default_run_logged_to_a_file_is_quiet_and_informative(mnist_root, tmp_path):
    """As `make train` runs (W&B default logger, progress bar, summary), with its output in a file."""
    args = [f"--data.root={mnist_root}", "--trainer.max_epochs=2", "--data.val_size=0.2"]
    result = run_process("fit", *args, "--data.num_workers=0", shrink=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert [line for line in NOISE if line in output] == []
    assert "fit: SingleDeviceStrategy, world size 1" in output and "done: best val/acc" in output
    assert " img/s" in output
    assert "FLOPs" in output and "MnistCNN" in output  # the summary lists the network, with its FLOPs
