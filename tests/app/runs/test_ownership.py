"""A command writes only into its own run, checks before it writes, and leaves nothing when it fails."""

import fcntl
import hashlib

import pytest
import torch
import yaml
from helpers.cli import callback, check, run_app, run_folder, run_process

TWO_EPOCHS = ["--trainer.max_epochs=2", "--data.batch_size=64", "--test_after_fit=false"]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def error_line(result) -> str:
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    return result.stderr.strip().splitlines()[-1]


def test_a_checkpoint_that_does_not_fit_is_refused_before_anything_is_written(
    cifar10_root, trained_here, tmp_path
):
    """The checkpoint brings its network (MnistCNN); colour images at 32 px do not fit its weights."""
    cifar = ["--data=CIFAR10DataModule", f"--data.root={cifar10_root}", "--data.verify=false"]
    run = trained_here
    best = next((run / "checkpoints").glob("best-*.ckpt"))
    before = {p: digest(p) for p in run.rglob("*") if p.is_file()}
    result = run_app("fit", *cifar, f"--ckpt_path={best}", cwd=tmp_path)
    line = error_line(result)
    assert line.startswith(f"error: --ckpt_path {best} does not fit this network: net.")
    assert {p: digest(p) for p in run.rglob("*") if p.is_file() and p.name != ".lock"} == {
        p: h for p, h in before.items() if p.name != ".lock"
    }
    check(run_app("test", f"--ckpt_path={best}", cwd=tmp_path))  # the run's own config still applies


@pytest.mark.part("app.wandb_logger")
def test_rerunning_a_recorded_config_starts_a_new_run_beside_it(mnist_root, tmp_path):
    data = f"--data.root={mnist_root}"
    wandb = ["--trainer.logger=app.wandb_logger.WandbLogger", "--trainer.logger.offline=true"]
    check(run_app("fit", data, "--test_after_fit=false", *wandb, cwd=tmp_path))
    first = run_folder(tmp_path)
    config = first / "config.yaml"
    assert yaml.safe_load(config.read_text())["trainer"]["default_root_dir"] == "runs"
    check(run_app("fit", f"--config={config}", data, *wandb, cwd=tmp_path))
    second = run_folder(tmp_path, version=1)
    assert second.parent == first.parent and not list(first.glob("*/version_*"))
    assert (first / "wandb-id").read_text() != (second / "wandb-id").read_text()


def test_evaluating_without_weights_is_one_line_unless_asked_for(mnist_root, tmp_path):
    for command in ("test", "predict", "validate"):
        line = error_line(run_app(command, f"--data.root={mnist_root}", cwd=tmp_path))
        assert line.startswith(f"error: {command} needs trained weights: pass --ckpt_path")
    check(run_app("test", f"--data.root={mnist_root}", "--untrained=true", cwd=tmp_path))


def test_a_failed_start_leaves_no_run_folder(tmp_path):
    result = run_app("fit", f"--data.root={tmp_path / 'nothing'}", "--data.download=false", cwd=tmp_path)
    assert error_line(result).startswith("error: MNIST not found")
    assert not list(tmp_path.glob("runs/*/version_*"))


def test_a_run_being_written_is_refused_to_a_second_writer(mnist_root, trained_here, tmp_path):
    data = f"--data.root={mnist_root}"
    run = trained_here
    with open(run / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.truncate(0)
        held.write("pid 4242 on node7: fit --ckpt_path last\n")
        held.flush()
        result = run_app("fit", data, "--trainer.max_epochs=2", "--ckpt_path=last", cwd=tmp_path)
        line = error_line(result)
        assert line == (
            f"error: the run folder {run.relative_to(tmp_path)} is in use by pid 4242 on node7: fit "
            "--ckpt_path last; wait for it to end, or start a new run (without --ckpt_path)"
        )
    check(run_app("fit", data, "--trainer.max_epochs=2", "--ckpt_path=last", cwd=tmp_path))


@pytest.mark.full
def test_ctrl_c_saves_last_ckpt_and_prints_the_resume_command(mnist_root, tmp_path):
    args = [*TWO_EPOCHS, f"--data.root={mnist_root}", "--last_checkpoint.every_n_steps=0"]
    result = run_process("fit", *args, callback("helpers.stops.SigintAt", step=5), cwd=tmp_path)
    assert result.returncode == 130, result.stderr[-2000:]
    last = run_folder(tmp_path) / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 5
    line = result.stderr.strip().splitlines()[-1]
    saved = last.relative_to(tmp_path)
    assert line.startswith(f"stopped by Ctrl-C: saved {saved}; resume with:")
    assert line.endswith("--ckpt_path last") and "python -m app fit" in line


def test_a_network_other_than_the_checkpoints_is_one_line_not_a_silent_swap(
    mnist_root, trained_here, tmp_path
):
    """The checkpoint holds its network: Lightning would put it over --model.net unsaid."""
    best = next((trained_here / "checkpoints").glob("best-*.ckpt"))
    args = [f"--data.root={mnist_root}", "--model.net=CifarCNN", f"--ckpt_path={best}"]
    assert error_line(run_app("fit", *args, cwd=tmp_path)) == (
        f"error: --ckpt_path {best} was trained with --model.net MnistCNN, this run has CifarCNN: drop "
        "--model.net (the checkpoint's is used), or start a new run from its weights with "
        f"--model.init_from {best}"
    )
