"""Resume and what can go wrong around checkpoints: SIGTERM, torn files, a NaN loss, a full disk."""

import errno
import hashlib
import os
import re
import resource
import signal
import subprocess

import pytest
import torch
from helpers.cli import (
    app_command,
    app_env,
    callback,
    check,
    load_probe,
    logged,
    max_difference,
    probe,
    run_app,
    run_folder,
    run_process,
)

# 512 training samples at batch 64: 8 steps per epoch, 16 in all.
TWO_EPOCHS = [
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=1.0",
    "--data.batch_size=64",
    "--test_after_fit=false",
    "--last_checkpoint.every_n_steps=3",
]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_resume_after_sigterm_ends_with_the_weights_of_an_uninterrupted_run(mnist_root, tmp_path):
    """One run stopped twice: at step 5, mid-epoch (resumed at its first unseen batch), then at step 8, at
    the epoch boundary; each stop saves its step and each resume picks it up, and the run ends with the
    weights of one never stopped."""
    data = f"--data.root={mnist_root}"
    check(run_app("fit", *TWO_EPOCHS, data, probe(tmp_path / "whole"), cwd=tmp_path / "whole"))
    whole = load_probe(tmp_path / "whole", "end", 0)
    assert whole["global_step"] == 16
    cut, resume = tmp_path / "cut", []
    for step in (5, 8):
        stop = callback("helpers.stops.SigtermAt", step=step)
        result = run_app("fit", *TWO_EPOCHS, data, *resume, stop, cwd=cut)
        assert result.returncode == 143, result.stderr[-2000:]
        assert result.stderr.strip().splitlines()[-1].startswith("stopped by SIGTERM: saved ")
        last = run_folder(cut) / "checkpoints" / "last.ckpt"
        if resume:  # the run stopped at step 8 is step 5's, resumed
            assert f"resuming from {last.relative_to(cut)}" in result.stderr
        assert torch.load(last, weights_only=True)["global_step"] == step
        resume = ["--ckpt_path=last"]
    resumed = run_app("fit", *TWO_EPOCHS, data, *resume, probe(cut / "probe"), cwd=cut)
    check(resumed)
    assert f"resuming from {last.relative_to(cut)}" in resumed.stderr
    end = load_probe(cut / "probe", "end", 0)
    assert end["global_step"] == 16
    assert max_difference(end["weights"], whole["weights"]) == 0
    # Each resume continued its own run: no second version folder.
    assert not list(cut.glob("runs/*/version_1"))


@pytest.mark.parametrize("workers", [0, 2])
def test_mid_epoch_resume_on_the_dataloader_path_is_exact(workers, cifar10_root, tmp_path):
    # CIFAR-10's per-image random crop and flip, in a DataLoader with `workers` worker processes:
    # 400 training samples at batch 50, 8 steps an epoch; SIGTERM after step 12, in the second epoch
    # (whose order is not the first's), then resumed.
    args = [
        *TWO_EPOCHS[:2],
        *TWO_EPOCHS[3:],
        "--data.batch_size=50",
        f"--data.root={cifar10_root}",
        "--data.verify=false",
        "--data.loader=torch",
        f"--data.num_workers={workers}",
    ]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    check(run_app("fit", *args, probe(whole), cwd=whole, configs=("configs/cifar10.yaml",)))
    stopped = run_app(
        "fit", *args, callback("helpers.stops.SigtermAt", step=12), cwd=cut, configs=("configs/cifar10.yaml",)
    )
    assert stopped.returncode == 143, stopped.stderr[-2000:]
    resumed = run_app(
        "fit", *args, "--ckpt_path=last", probe(cut), cwd=cut, configs=("configs/cifar10.yaml",)
    )
    check(resumed)
    end, uninterrupted = load_probe(cut, "end", 0), load_probe(whole, "end", 0)
    assert end["global_step"] == uninterrupted["global_step"] == 16
    assert max_difference(end["weights"], uninterrupted["weights"]) == 0


@pytest.mark.parametrize("loader", ["resident", "torch"])
def test_mid_epoch_resume_with_balanced_sampling_is_exact(loader, imbalanced_mnist_root, tmp_path):
    # 440 training samples of imbalanced classes, batch 64: 7 steps an epoch; SIGTERM 3 steps into the 2nd.
    args = [
        *TWO_EPOCHS,
        f"--data.root={imbalanced_mnist_root}",
        "--data.sampler=balanced",
        f"--data.loader={loader}",
    ]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    check(run_app("fit", *args, probe(whole), cwd=whole))
    stopped = run_app("fit", *args, callback("helpers.stops.SigtermAt", step=10), cwd=cut)
    assert stopped.returncode == 143, stopped.stderr[-2000:]
    check(run_app("fit", *args, "--ckpt_path=last", probe(cut), cwd=cut))
    end, uninterrupted = load_probe(cut, "end", 0), load_probe(whole, "end", 0)
    assert end["global_step"] == uninterrupted["global_step"] == 14
    assert max_difference(end["weights"], uninterrupted["weights"]) == 0


def test_last_skips_a_torn_checkpoint_and_names_it(mnist_root, trained_here, tmp_path):
    data = f"--data.root={mnist_root}"
    run = trained_here
    last = run / "checkpoints" / "last.ckpt"
    best = next((run / "checkpoints").glob("best-*.ckpt"))
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # a save cut short without atomic writes
    last.touch()
    resumed = run_app("fit", data, "--trainer.max_epochs=2", "--ckpt_path=last", cwd=tmp_path)
    check(resumed)
    assert f"skipping {last.relative_to(tmp_path)}: not a complete checkpoint" in resumed.stderr
    assert f"resuming from {best.relative_to(tmp_path)}" in resumed.stderr
    assert torch.load(last, weights_only=True)["global_step"] == 8  # rewritten whole by the resumed run

    last.write_bytes(b"PK\x03\x04 not really a checkpoint")
    result = run_app("test", f"--ckpt_path={last}", data, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --ckpt_path {last} is not a complete checkpoint (cut short or corrupt); "
        "--ckpt_path last picks the newest intact one"
    )


def test_runs_get_their_own_folders_and_last_means_the_newest(mnist_root, trained_here, tmp_path):
    data = f"--data.root={mnist_root}"
    check(run_app("fit", data, "--test_after_fit=false", cwd=tmp_path))  # the same as trained_here's run
    check(run_app("fit", data, "--test_after_fit=false", "--name=mine", cwd=tmp_path))
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("runs/*/*")) == [
        "runs/MNIST-MnistCNN/version_0",
        "runs/MNIST-MnistCNN/version_1",
        "runs/mine/version_0",
    ]
    resumed = run_app("fit", data, "--trainer.max_epochs=2", "--ckpt_path=last", cwd=tmp_path)
    check(resumed)
    assert "resuming from runs/MNIST-MnistCNN/version_1/checkpoints/" in resumed.stderr


@pytest.mark.part("app.nan_stop")
def test_nan_weights_stop_at_the_epoch_end_and_keep_the_last_good_checkpoint(mnist_root, tmp_path):
    result = run_app(
        "fit", *TWO_EPOCHS, f"--data.root={mnist_root}", callback("helpers.stops.NanAt", step=7), cwd=tmp_path
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = run_folder(tmp_path) / "checkpoints" / "last.ckpt"
    assert result.stderr.strip().splitlines()[-1] == (
        "error: the weights are not finite at step 8 (finite at step 6): the training loss went NaN or "
        f"infinite in between; the last good checkpoint is {last.relative_to(tmp_path)}; "
        "lower --model.optimizer.lr (or check the data) and resume with --ckpt_path last"
    )
    saved = torch.load(last, weights_only=True)
    assert saved["global_step"] == 6
    assert all(torch.isfinite(w).all() for w in saved["state_dict"].values())


@pytest.mark.part("app.nan_stop")
def test_nan_weights_are_caught_before_the_next_checkpoint(mnist_root, tmp_path):
    """The weights are checked when a checkpoint is saved, not at every step: none holds a bad step."""
    args = [*TWO_EPOCHS, "--trainer.log_every_n_steps=50", f"--data.root={mnist_root}"]
    result = run_app("fit", *args, callback("helpers.stops.NanAt", step=3), cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    error = "error: the weights are not finite at step 6 (finite at step 3): "
    assert result.stderr.strip().splitlines()[-1].startswith(error)
    saved = torch.load(run_folder(tmp_path) / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == 3  # the save at step 6 was refused
    assert all(torch.isfinite(w).all() for w in saved["state_dict"].values())


@pytest.mark.part("app.nan_stop")
@pytest.mark.full
@pytest.mark.distributed
def test_nan_weights_on_one_rank_stop_every_rank_at_the_same_step(mnist_root, tmp_path):
    ddp = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]
    args = [*TWO_EPOCHS, *ddp, "--data.batch_size=32", f"--data.root={mnist_root}"]
    result = run_process("fit", *args, callback("helpers.stops.NanAt", step=3, rank=1), cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    # Rank 1's weight alone is spoiled: the ranks agree at the next save.
    assert "error: the weights are not finite at step 6 (finite at step 3): " in result.stderr
    saved = torch.load(run_folder(tmp_path) / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == 3
    assert all(torch.isfinite(w).all() for w in saved["state_dict"].values())


@pytest.mark.full
@pytest.mark.versions  # make test-lowest
def test_full_disk_while_saving_keeps_the_checkpoints_and_resume_is_exact(mnist_root, tmp_path):
    """Checkpoints outgrow the process's file-size limit mid-run (as on a full disk): last.ckpt and the
    best checkpoint stay whole, one line names the folder and the bytes; once there is room, the resume
    ends with the weights of an uninterrupted run."""
    data = f"--data.root={mnist_root}"
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    check(run_app("fit", *TWO_EPOCHS, data, probe(whole / "probe"), cwd=whole))
    stopped = run_app("fit", *TWO_EPOCHS, data, callback("helpers.stops.SigtermAt", step=10), cwd=cut)
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    folder = run_folder(cut) / "checkpoints"
    saved = {p: digest(p) for p in folder.glob("*.ckpt")}
    assert {p.name for p in saved} == {"last.ckpt", "best-epoch00-step8.ckpt"}

    def small_disk() -> None:
        # Files may not grow past 200 kB (a checkpoint is 1.2 MB): writes fail as on a full disk.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    command = app_command("fit", *TWO_EPOCHS, data, "--ckpt_path=last")
    result = subprocess.run(
        command, cwd=cut, env=app_env(), capture_output=True, text=True, timeout=300, preexec_fn=small_disk
    )
    # Its first save, at step 12, is the one that fails.
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    needs = re.search(r"it needs ([\d,]+) bytes", line)
    assert needs and line == (
        f"error: no room for checkpoint last.ckpt in {folder.relative_to(cut)} ({os.strerror(errno.EFBIG)}): "
        f"it needs {needs[1]} bytes; free that much there or pass another --trainer.default_root_dir; "
        "the previous one is kept"
    )
    # The checkpoint it could not write: about the size of the one before (the same within a few bytes
    # of pickled counters, which some torch releases store in fewer bytes than others).
    assert abs(int(needs[1].replace(",", "")) - (folder / "last.ckpt").stat().st_size) < 1_000
    assert {p: digest(p) for p in folder.iterdir()} == saved  # no partial file either
    for path in saved:
        torch.load(path, weights_only=True)
    check(run_app("fit", *TWO_EPOCHS, data, probe(cut / "probe"), "--ckpt_path=last", cwd=cut))
    ends = [load_probe(c / "probe", "end", 0) for c in (whole, cut)]
    assert ends[0]["global_step"] == ends[1]["global_step"] == 16
    assert max_difference(ends[0]["weights"], ends[1]["weights"]) == 0


def test_train_loss_reaches_the_logger_every_epoch_however_short(mnist_root, tmp_path):
    args = [f"--data.root={mnist_root}", "--trainer.max_epochs=3", "--trainer.log_every_n_steps=50"]
    check(run_app("fit", *args, "--test_after_fit=false", cwd=tmp_path))
    assert len(logged(run_folder(tmp_path))["train/loss"]) == 3
