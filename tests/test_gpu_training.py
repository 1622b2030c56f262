"""On one CUDA GPU: the resident loaders, mixed precision, torch.compile, real learning, the NaN stop."""

import json

import pytest
import torch
from helpers.cli import callback, check, logged, run_folder, run_process
from lightning import Trainer

from data import MNISTDataModule
from data.batch_transforms import normalize, random_resized_crop, resize

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
GPU = ["--trainer.accelerator=gpu", "--trainer.devices=1"]


def test_resident_loader_holds_the_split_on_the_gpu_and_serves_the_cpu_batches(mnist_root):
    kwargs = {"root": str(mnist_root), "download": False, "batch_size": 32, "num_workers": 0, "val_size": 0.2}
    gpu, cpu = MNISTDataModule(**kwargs), MNISTDataModule(**kwargs)
    gpu.trainer = Trainer(accelerator="gpu", devices=1, logger=False)
    for dm in (gpu, cpu):
        dm.setup("fit")
    loader = gpu.train_dataloader()
    assert loader.images.is_cuda and loader.images.dtype == torch.uint8
    for split in ("train_dataloader", "val_dataloader"):
        batches = zip(getattr(gpu, split)(), getattr(cpu, split)(), strict=True)
        for (x, y), (x_cpu, y_cpu) in batches:
            assert x.is_cuda and y.is_cuda and x.dtype == torch.float32
            assert torch.equal(y.cpu(), y_cpu) and torch.allclose(x.cpu(), x_cpu, atol=1e-5)


def fit(tmp_path, name: str, *args: str):
    """Three epochs on the fixture's 512 MNIST training images; its run folder and logged metrics."""
    cwd = tmp_path / name
    # lr 0.05: at the default 0.01 these 48 steps leave the test accuracy at chance (0.12), CPU or GPU.
    long = ["--trainer.max_epochs=3", "--trainer.limit_train_batches=1.0", "--data.batch_size=32"]
    long.append("--model.optimizer.lr=0.05")
    check(run_process("fit", *GPU, *long, *args, cwd=cwd))
    return run_folder(cwd), logged(run_folder(cwd))


def test_mixed_precision_and_compile_train_like_fp32(mnist_root, tmp_path):
    data = f"--data.root={mnist_root}"
    variants = {
        "fp32": [],
        "bf16-mixed": ["--trainer.precision=bf16-mixed"],
        "16-mixed": ["--trainer.precision=16-mixed"],
        "compile": ["--model.compile=true"],
    }
    accuracy = {}
    for name, args in variants.items():
        run, metrics = fit(tmp_path, name, data, *args)
        loss = metrics["train/loss"]
        accuracy[name] = metrics["test/acc"][-1]
        print(f"{name}: train loss {loss[0]:.3f} -> {loss[-1]:.3f}, test acc {accuracy[name]:.4f}")
        assert torch.isfinite(torch.tensor(loss)).all() and loss[-1] < loss[0]
        state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
        assert not any("_orig_mod" in key for key in state)  # compiled or not, the same keys
        assert all(w.dtype != torch.float16 and w.dtype != torch.bfloat16 for w in state.values())
    assert accuracy["fp32"] > 0.5  # chance is 0.1
    assert all(abs(acc - accuracy["fp32"]) <= 0.1 for acc in accuracy.values())


def test_no_host_sync_between_logging_steps_and_one_at_most_at_each(mnist_root, tmp_path):
    """Any sync between two logging steps fails the fit (set_sync_debug_mode "error"); a logging
    step's syncs, counted, come after backward: Lightning's read of the loss for the loggers, which the
    bar shows."""
    guard = tmp_path / "syncs.json"
    args = [f"--data.root={mnist_root}", "--data.batch_size=16", "--trainer.log_every_n_steps=5"]
    args += ["--last_checkpoint.every_n_steps=0", "--trainer.enable_progress_bar=true"]
    fit(tmp_path, "syncs", *args, callback("helpers.sync_guard.SyncGuard", file=str(guard)))
    record = json.loads(guard.read_text())
    assert record["checked"] >= 20  # steps run in error mode, each between two logging steps
    assert record["syncs"] and max(record["syncs"].values()) <= 1, record["syncs"]
    assert set(record["before_backward"].values()) == {0}, record["before_backward"]


def test_fast_preset_reaches_91_percent(fashion_mnist, tmp_path):
    result = run_process(
        "fit",
        *GPU,
        "--trainer.logger=CSVLogger",
        f"--data.root={tmp_path / 'datasets'}",
        configs=("configs/fashion_mnist_fast.yaml",),
        shrink=False,
        cwd=tmp_path,
    )
    check(result)
    test_acc = logged(run_folder(tmp_path))["test/acc"][-1]
    print(f"Fashion-MNIST test accuracy of the fast preset on the GPU: {test_acc:.4f}")
    assert test_acc >= 0.91


def test_nan_loss_stops_before_the_next_checkpoint(mnist_root, tmp_path):
    nan = {"class_path": "helpers.stops.NanAt", "init_args": {"step": 3}}
    args = [*GPU, f"--data.root={mnist_root}", "--trainer.max_epochs=2", "--trainer.limit_train_batches=1.0"]
    args += ["--data.batch_size=64", "--last_checkpoint.every_n_steps=3", "--trainer.log_every_n_steps=50"]
    result = run_process("fit", *args, f"--trainer.callbacks+={json.dumps(nan)}", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: the training loss is nan at step 4; ")
    saved = torch.load(run_folder(tmp_path) / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == 3
    assert all(torch.isfinite(w).all() for w in saved["state_dict"].values())


def test_the_photo_crop_on_the_gpu_matches_the_cpus_uint8_resize():
    # The CUDA path resizes in float and rounds; the CPU's uint8 kernel rounds its own way.
    images = torch.randint(0, 256, (8, 3, 73, 73), dtype=torch.uint8).contiguous(
        memory_format=torch.channels_last
    )
    for top, left, h, w in [(0, 0, 73, 73), (5, 9, 30, 41), (40, 2, 33, 25)]:
        crop = images[:1, :, top : top + h, left : left + w]
        on_gpu, on_cpu = resize(crop.cuda(), 64), resize(crop, 64)
        assert on_gpu.dtype == torch.uint8 and on_gpu.shape == (1, 3, 64, 64)
        assert (on_gpu.cpu().int() - on_cpu.int()).abs().max() <= 1
    batch = random_resized_crop(
        images.cuda(), 64, (0.08, 1.0), torch.Generator("cuda").manual_seed(0), flip=True
    )
    assert batch.is_cuda and batch.shape == (8, 3, 64, 64)
    # Picked images, standardized: the batch's uint8 crops normalized at once on the GPU.
    picks, mean, std = torch.tensor([5, 1, 1]).cuda(), torch.rand(3).cuda(), torch.rand(3).cuda() + 0.1
    floats = random_resized_crop(
        images.cuda(), 64, (0.08, 1.0), torch.Generator("cuda").manual_seed(0), True, picks, (mean, std)
    )
    crops = random_resized_crop(
        images.cuda()[picks], 64, (0.08, 1.0), torch.Generator("cuda").manual_seed(0), True
    )
    assert floats.dtype == torch.float32 and torch.equal(floats, normalize(crops, mean, std))
