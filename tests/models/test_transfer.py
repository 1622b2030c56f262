"""Real transfer on Fashion-MNIST: features learnt on six classes help learn the other four."""

import re

import pytest
import torch
from helpers.cli import check, run_app, run_folder
from helpers.data_files import write_fashion_folder

pytestmark = pytest.mark.part("data.image_folder")

# Photos as a user has them (RGB JPEG files, one folder per class); validation left out of the short runs.
COMMON = [
    "--data=ImageFolderDataModule",
    "--data.image_size=28",
    "--data.batch_size=32",
    "--data.val_size=8",
    "--model.net=FastCNN",
    "--model.optimizer.lr=0.05",
    "--trainer.limit_train_batches=1.0",
    "--trainer.check_val_every_n_epoch=10",
    "--trainer.callbacks=[]",  # no pictures or plots
]
STEPS = 8  # on 32 training images of the four new classes: one step an epoch


def test_init_from_with_a_frozen_body_beats_the_same_steps_from_scratch(fashion_mnist, tmp_path):
    source = write_fashion_folder(tmp_path / "six", fashion_mnist, list(range(6)), train=60, test=1)
    target = write_fashion_folder(tmp_path / "four", fashion_mnist, [6, 7, 8, 9], train=10, test=50, seed=1)
    args = [*COMMON, f"--data.root={source}", "--trainer.max_epochs=2", "--test_after_fit=false"]
    check(run_app("fit", *args, cwd=tmp_path / "source"))
    ckpt = run_folder(tmp_path / "source") / "checkpoints" / "last.ckpt"

    def accuracy(name: str, *extra: str) -> tuple[float, str]:
        steps = [f"--trainer.max_steps={STEPS}", "--trainer.max_epochs=-1", "--seed_everything=1"]
        result = run_app("fit", *COMMON, f"--data.root={target}", *steps, *extra, cwd=tmp_path / name)
        check(result)
        return float(re.search(r"test/acc ([0-9.]+)", result.stderr).group(1)), result.stderr

    transfer, log = accuracy("transfer", f"--model.init_from={ckpt}", "--model.freeze=features")
    scratch, _ = accuracy("scratch")
    assert transfer >= scratch + 0.05, (transfer, scratch)
    assert (
        f"init_from {ckpt}: loaded 20/22 tensors; skipped net.head.2.weight: shape 6x128 in the file vs "
        "4x128 here, net.head.2.bias: shape 6 in the file vs 4 here"
    ) in log
    before = torch.load(ckpt, weights_only=True)["state_dict"]
    after = torch.load(run_folder(tmp_path / "transfer") / "checkpoints" / "last.ckpt", weights_only=True)
    body = [k for k in before if k.startswith("net.features.")]
    assert len(body) == 18  # 3 convolutions, 3 BatchNorms with their running statistics and counts
    assert all(torch.equal(before[k], after["state_dict"][k]) for k in body)
    assert not torch.equal(before["net.head.0.weight"], after["state_dict"]["net.head.0.weight"])
