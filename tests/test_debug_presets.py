"""The debug presets stack on any preset and do what they say."""

import json

import pytest
import torch
from helpers.cli import callback, check, logged, run_app, run_folder

from data import MNISTDataModule
from models import ImageClassifier, MnistCNN

DEBUG = ["configs/debug/fast_dev_run.yaml", "configs/debug/limit_batches.yaml", "configs/debug/profile.yaml"]


@pytest.mark.parametrize("preset", DEBUG)
def test_each_debug_preset_stacks_on_a_preset_and_runs(preset, mnist_root, tmp_path):
    args = [f"--data.root={mnist_root}", "--data.val_size=0.2", "--data.num_workers=0"]
    args += ["--trainer.logger=CSVLogger", "--trainer.enable_progress_bar=false"]
    result = run_app("fit", *args, configs=("configs/mnist.yaml", preset), shrink=False, cwd=tmp_path)
    check(result)
    if preset.endswith("fast_dev_run.yaml"):  # a smoke test of the code: no run folder, no checkpoint
        assert "Running in `fast_dev_run` mode" in result.stderr + result.stdout  # it ran as one
        assert not list(tmp_path.glob("runs/*/version_*"))
    if preset.endswith("profile.yaml"):
        report = (run_folder(tmp_path) / "fit-profile.txt").read_text()
        assert "run_training_epoch" in report


@pytest.mark.parametrize("fast_dev_run", [True, False])
def test_fast_dev_run_gets_no_config_callback_and_writes_no_config_yaml(fast_dev_run, mnist_root, tmp_path):
    """Lightning adds the CLI's config callback outside fast_dev_run only: RunConfig needs no check of it."""
    ran = tmp_path / "ran.json"
    args = [f"--data.root={mnist_root}", f"--trainer.fast_dev_run={str(fast_dev_run).lower()}"]
    check(run_app("fit", *args, callback("helpers.trainer_probe.TrainerProbe", file=str(ran)), cwd=tmp_path))
    probed = json.loads(ran.read_text())
    # By fit's start every setup hook has run, RunConfig's (which writes config.yaml) included.
    assert ("app.runs.config.RunConfig" in probed["callbacks"]) is not fast_dev_run
    assert ("config.yaml" in probed["files"]) is not fast_dev_run


def test_overfit_preset_learns_its_batches_by_heart(mnist_root, tmp_path):
    """A model that can learn: 4 batches seen 60 times end ~100 % right."""
    args = [
        f"--data.root={mnist_root}",
        "--data.val_size=0.2",
        "--data.num_workers=0",
        "--data.batch_size=32",
    ]
    args += ["--trainer.logger=CSVLogger", "--trainer.enable_progress_bar=false"]
    configs = ("configs/mnist.yaml", "configs/debug/overfit.yaml")
    check(run_app("fit", *args, configs=configs, shrink=False, cwd=tmp_path))
    ckpt = run_folder(tmp_path) / "checkpoints" / "last.ckpt"
    model = ImageClassifier(MnistCNN(), 10)
    model.load_state_dict(torch.load(ckpt, weights_only=True)["state_dict"])
    data = MNISTDataModule(root=str(mnist_root), download=False, batch_size=32, val_size=0.2, num_workers=0)
    data.setup("fit")
    # overfit_batches trains on the first batches of the training split, unshuffled.
    images, labels = zip(*(data.train_set[i] for i in range(4 * 32)), strict=True)
    with torch.no_grad():
        predicted = model.eval()(torch.stack(images)).argmax(1)
    accuracy = (predicted == torch.tensor(labels)).float().mean().item()
    assert accuracy >= 0.98, (accuracy, logged(run_folder(tmp_path))["train/loss"][-3:])
