"""``--trainer.strategy dp``: the Trainer's, harmless on CPU, checkpoints portable, loss as on one GPU."""

import copy

import pytest
import torch
from helpers.cli import check, logged, run_app, run_folder, run_process
from lightning import Trainer

from app.dp import DataParallelStrategy
from app.trainer import Trainer as AppTrainer
from data import MNISTDataModule
from models import ImageClassifier, MnistCNN

CPU2 = ["--trainer.accelerator=cpu", "--trainer.devices=2"]


def test_the_trainer_takes_dp_for_the_strategy_of_this_part():
    trainer = AppTrainer(strategy="dp", accelerator="cpu", logger=False, enable_checkpointing=False)
    assert isinstance(trainer.strategy, DataParallelStrategy)


def test_dp_on_cpu_trains_as_one_process_with_one_warning(mnist_root, tmp_path):
    result = run_app("fit", *CPU2, "--trainer.strategy=dp", f"--data.root={mnist_root}", cwd=tmp_path)
    check(result)
    output = result.stdout + result.stderr
    assert output.count("runs as a single process") == 1
    assert "with linear scaling to world size 1" in output
    assert "test/acc" in logged(run_folder(tmp_path))


def test_dp_with_sync_batchnorm_is_one_clear_line(tmp_path):
    result = run_app("fit", "--trainer.strategy=dp", "--trainer.sync_batchnorm=true", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: `strategy='dp'` runs one process")


@pytest.mark.full
@pytest.mark.distributed
def test_a_dp_checkpoint_tests_alike_under_ddp(mnist_root, tmp_path):
    """The other way, a ddp checkpoint evaluated under dp, is in test_distributed.py's evaluation test."""
    data = f"--data.root={mnist_root}"
    check(run_app("fit", *CPU2, "--trainer.strategy=dp", data, cwd=tmp_path))
    run = run_folder(tmp_path)
    last = run / "checkpoints" / "last.ckpt"
    weights = torch.load(last, weights_only=True)["state_dict"]
    assert weights.keys() == ImageClassifier(MnistCNN()).state_dict().keys()
    args = [*CPU2, "--trainer.strategy=ddp", f"--ckpt_path={last}", data]
    check(run_process("test", *args, configs=(str(run / "config.yaml"),), cwd=tmp_path))
    # One epoch: fit tested its best checkpoint, which is its last.
    first, again = logged(run)["test/acc"]
    assert again == first


class FirstLoss(ImageClassifier):
    """Keeps the first training batch and the loss computed on it."""

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        if batch_idx == 0:
            self.first = (batch[0].detach().clone(), batch[1].clone(), loss.detach().clone())
        return loss


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="DataParallel needs 2 or more GPUs")
def test_dp_loss_on_gathered_outputs_equals_one_device(mnist_root, tmp_path):
    model = FirstLoss(MnistCNN())
    reference = copy.deepcopy(model.net).cuda(0)
    dm = MNISTDataModule(root=str(mnist_root), download=False, batch_size=64, num_workers=0, val_size=128)
    trainer = Trainer(
        accelerator="gpu",
        devices=-1,
        strategy="dp",
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        num_sanity_val_steps=0,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, dm)
    x, y, dp_loss = model.first
    with torch.no_grad():
        single = torch.nn.functional.cross_entropy(reference(x.cuda(0)), y.cuda(0))
    assert dp_loss.device == torch.device("cuda", 0)
    assert dp_loss.item() == pytest.approx(single.item(), rel=1e-5)
    assert "module." not in "".join(model.state_dict())
