"""The recipe as configuration: any optimizer and schedule from the command line, fitted to the run."""

import functools
import itertools
import math
import re

import pytest
import torch
from helpers.cli import check, logged, run_app, run_folder

from data import MNISTDataModule
from models import ImageClassifier, MnistCNN, ResNet, optimization

LR_MONITOR = ["--trainer.callbacks+=LearningRateMonitor", "--trainer.callbacks.logging_interval=step"]


def hand_chained(lr: float, steps: int, warmup: int, final: float, longer: int | None = None) -> list[float]:
    """The lr of each step as the template built it by hand before the schedule was configurable:
    torch's LinearLR then CosineAnnealingLR; ``longer``: the cosine stretched at the end of ``steps``."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=lr)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps - warmup, eta_min=lr * final)
    schedule = cosine
    if warmup:
        rise = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1 / (warmup + 1), total_iters=warmup)
        schedule = torch.optim.lr_scheduler.SequentialLR(optimizer, [rise, cosine], milestones=[warmup])
    seen = []
    for step in range(longer or steps):
        if step == steps:
            cosine.T_max = longer - warmup
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return seen


@pytest.mark.parametrize("warmup_ratio", [0.0, 0.25])
def test_the_default_recipe_gives_the_lr_of_the_hand_built_schedule_at_every_step(
    warmup_ratio, mnist_root, tmp_path
):
    """8 steps, then the same run resumed for 16: every lr within 1e-7 of the hand-chained one; the
    resumed run says so in one line, and its cosine goes on falling, not climbing back."""
    args = [f"--data.root={mnist_root}", "--test_after_fit=false", *LR_MONITOR]
    args += [f"--model.scheduler.warmup_ratio={warmup_ratio}", "--model.optimizer.lr=0.1"]
    check(run_app("fit", *args, "--trainer.max_epochs=2", cwd=tmp_path))
    resumed = run_app("fit", *args, "--trainer.max_epochs=4", "--ckpt_path=last", cwd=tmp_path)
    check(resumed)
    assert "lr schedule: this run now ends at step 16 (planned: 8)" in resumed.stderr
    seen = logged(run_folder(tmp_path))["lr-SGD"]
    expected = hand_chained(0.1, steps=8, warmup=int(warmup_ratio * 8), final=0.1, longer=16)
    assert len(seen) == 16
    assert max(abs(a - b) for a, b in zip(seen, expected, strict=True)) < 1e-7
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(seen[7:]))  # past any warmup


def test_a_schedule_gets_the_run_length_and_scaled_lrs_it_takes(mnist_root, tmp_path):
    """CosineAnnealingLR's T_max is the run's 8 steps: its eta_min is reached at the end."""
    args = [f"--data.root={mnist_root}", "--test_after_fit=false", "--trainer.max_epochs=2", *LR_MONITOR]
    args += ["--model.optimizer=AdamW", "--model.optimizer.lr=0.004"]
    args += ["--model.scheduler=CosineAnnealingLR", "--model.scheduler.eta_min=0.001"]
    check(run_app("fit", *args, cwd=tmp_path))
    seen = logged(run_folder(tmp_path))["lr-AdamW"]
    assert seen[0] == pytest.approx(0.004)
    assert seen[-1] == pytest.approx(0.001 + 0.003 * (1 + math.cos(math.pi * 7 / 8)) / 2)


def test_reduce_on_plateau_steps_after_each_validation_on_its_monitor(mnist_root, tmp_path):
    """Watching val/loss for a rise (mode max) with no patience: the first validation sets the mark,
    each later one (a fall) cuts the lr 10x."""
    args = [f"--data.root={mnist_root}", "--test_after_fit=false", "--trainer.max_epochs=3", *LR_MONITOR]
    args += ["--model.scheduler=torch.optim.lr_scheduler.ReduceLROnPlateau"]
    args += [
        "--model.scheduler.mode=max",
        "--model.scheduler.patience=0",
        "--model.scheduler_monitor=val/loss",
    ]
    check(run_app("fit", *args, cwd=tmp_path))
    seen = logged(run_folder(tmp_path))["lr-SGD"]
    assert seen == pytest.approx([0.01] * 8 + [0.001] * 4)


def test_adamw_with_one_cycle_trains_fashion_mnist(fashion_mnist, tmp_path):
    """60 steps, tested on 1280 images: 0.72 to 0.74 over seeds. Chance is 0.10, and the same steps at
    OneCycleLR's starting lr (a schedule never stepped) reach 0.54 to 0.58: neither passes 0.70."""
    args = [f"--data.root={tmp_path / 'datasets'}", "--trainer.max_epochs=1", "--data.val_size=1000"]
    args += ["--model.optimizer=AdamW", "--model.optimizer.lr=0.001", "--model.optimizer.weight_decay=0.05"]
    args += ["--model.scheduler=OneCycleLR", "--model.scheduler.max_lr=0.004"]
    args += ["--trainer.limit_train_batches=60", "--data.batch_size=128", "--trainer.limit_test_batches=10"]
    check(run_app("fit", *args, configs=("configs/fashion_mnist.yaml",), cwd=tmp_path))
    assert logged(run_folder(tmp_path))["test/acc"][-1] > 0.70


def test_norm_weight_decay_puts_norm_weights_and_biases_in_their_own_group():
    net = ResNet(depth=8, in_channels=3, num_classes=10, image_size=32)
    groups = optimization.param_groups(net, set(), norm_weight_decay=0.0)
    sgd = functools.partial(torch.optim.SGD, lr=0.1, weight_decay=5e-3)
    plain, exempt = optimization.build_optimizer(sgd, groups, factor=1.0).param_groups
    assert plain["weight_decay"] == 5e-3 and exempt["weight_decay"] == 0.0
    norms = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    biases = [p for n, p in net.named_parameters() if n.endswith("bias")]
    assert {id(p) for p in exempt["params"]} == {id(m.weight) for m in norms} | {id(p) for p in biases}
    assert all(p.dim() > 1 for p in plain["params"])  # convolution and linear weights only


def test_mixup_and_cutmix_train_on_soft_targets(mnist_root, tmp_path):
    model = ImageClassifier(MnistCNN(), mixup_alpha=0.2, cutmix_alpha=1.0)
    x, y = torch.rand(8, 1, 28, 28), torch.arange(8) % 10
    mixed, soft = model.mix(x, y)
    assert mixed.shape == x.shape and soft.shape == (8, 10)
    assert torch.allclose(soft.sum(dim=1), torch.ones(8))
    args = [f"--data.root={mnist_root}", "--model.mixup_alpha=0.2", "--model.cutmix_alpha=1.0"]
    check(run_app("fit", *args, cwd=tmp_path))
    metrics = logged(run_folder(tmp_path))
    assert all(math.isfinite(v) for v in metrics["train/loss"])
    assert "train/acc" not in metrics and "test/acc" in metrics


def test_balanced_class_weights_come_from_the_training_split_counts(imbalanced_mnist_root, tmp_path):
    """Classes 0-4 with 10 training images, 5-9 with 100: each weighs N / (10 x its count)."""
    data = MNISTDataModule(root=str(imbalanced_mnist_root), download=False, val_size=50, num_workers=0)
    data.setup("fit")
    counts = torch.tensor(data.class_counts(), dtype=torch.float64)
    train_labels = torch.tensor([data.train_set.dataset.targets[i] for i in data.train_set.indices])
    assert counts.tolist() == torch.bincount(train_labels, minlength=10).tolist()
    expected = counts.sum() / (10 * counts)
    args = [f"--data.root={imbalanced_mnist_root}", "--data.val_size=50", "--model.class_weights=balanced"]
    result = run_app("fit", *args, "--test_after_fit=false", cwd=tmp_path)
    check(result)
    line = next(x for x in result.stderr.splitlines() if x.startswith("class weights (balanced): "))
    shown = [float(w) for w in line.split(": ")[1].split(", ")]
    assert shown == pytest.approx(expected.tolist(), rel=2e-3)
    assert min(shown[:5]) > 5 * max(shown[5:])


def test_a_resume_with_another_optimizer_or_a_fixed_schedule_made_longer_is_one_line(mnist_root, tmp_path):
    args = [f"--data.root={mnist_root}", "--test_after_fit=false"]
    one_cycle = ["--model.scheduler=OneCycleLR", "--model.scheduler.max_lr=0.02"]
    check(run_app("fit", *args, *one_cycle, cwd=tmp_path))
    saved = {p: p.read_bytes() for p in (run_folder(tmp_path) / "checkpoints").iterdir()}
    other = run_app("fit", *args, *one_cycle, "--model.optimizer=AdamW", "--ckpt_path=last", cwd=tmp_path)
    assert other.returncode == 1 and "Traceback" not in other.stderr
    assert re.fullmatch(
        r"error: --ckpt_path \S+\.ckpt was trained with --model.optimizer SGD, this run has AdamW: resume "
        r"with its optimizer, or start a new run from its weights: --model.init_from \S+\.ckpt",
        other.stderr.strip().splitlines()[-1],
    )
    longer = run_app("fit", *args, *one_cycle, "--trainer.max_epochs=2", "--ckpt_path=last", cwd=tmp_path)
    assert longer.returncode == 1 and "Traceback" not in longer.stderr
    assert longer.stderr.strip().splitlines()[-1] == (
        "error: OneCycleLR was planned for 4 steps and cannot be stretched to this run's 8: resume with the "
        "run's length, or start a new run from its weights with --model.init_from"
    )
    assert {p: p.read_bytes() for p in saved} == saved and not list(tmp_path.glob("runs/*/version_1"))
