"""Data parallelism proven by equivalence: real gloo processes against one process.

Every run goes through ``python -m app`` (Lightning's own launcher, torchrun, two "nodes" on
loopback); :class:`helpers.weights_probe.WeightsProbe` records each rank's weights and step count.
The launches compared with one process log to W&B, the default logger, as on a machine not logged in:
each job must make one offline W&B run and one run folder, whatever its number of ranks.
"""

import importlib.util
import subprocess
from pathlib import Path

import pytest
import torch
from helpers.cli import (
    SHRINK_WANDB,
    app_command,
    app_env,
    check,
    free_port,
    load_probe,
    logged,
    max_difference,
    probe,
    run_app,
    run_folder,
    run_process,
    wandb_offline_env,
)

pytestmark = pytest.mark.distributed
CPU2 = ["--trainer.accelerator=cpu", "--trainer.devices=2"]


@pytest.fixture(scope="module")
def single_2b(mnist_root, tmp_path_factory):
    """One process at batch 128 with lr 0.02: the reference for 2 processes at batch 64, lr 0.01 x 2."""
    return single_fit(mnist_root, tmp_path_factory, lr=0.02)


def single_fit(mnist_root, tmp_path_factory, lr: float) -> dict:
    cwd = tmp_path_factory.mktemp("single")
    args = ["--trainer.accelerator=cpu", "--trainer.devices=1", "--data.batch_size=128"]
    args.append(f"--model.optimizer.lr={lr}")
    check(
        run_app(
            "fit", *args, f"--data.root={mnist_root}", "--test_after_fit=false", probe(cwd / "probe"), cwd=cwd
        )
    )
    return load_probe(cwd / "probe", "end", 0)


def fit_logged_to_wandb(cwd: Path, *args: str, launcher: tuple[str, ...] = ()) -> str:
    """``fit`` with the default logger, W&B, offline; checks the job made one W&B run and one run
    folder, and returns its output."""
    result = run_process(
        "fit", *SHRINK_WANDB, *args, shrink=False, launcher=launcher, env=wandb_offline_env(cwd), cwd=cwd
    )
    check(result)
    if importlib.util.find_spec("app.wandb_logger") is not None:  # the W&B part, where the project has it
        assert len(list(cwd.glob("runs/*/*/wandb/offline-run-*"))) == 1
    assert len(list(cwd.glob("runs/*/*"))) == 1
    return result.stdout + result.stderr


# Float32 sums in another order (the gradient all-reduce, two half batches) make the gradients differ in
# their last bits, ~1e-7 relative; SGD moves each weight by lr x its gradient, so 4 steps end ~1e-8 apart.
# A real desynchronization (a step skipped, the lr not scaled to the world size) moves weights by lr x
# gradient, ~1e-3: test_the_tolerance_fails_a_run_whose_lr_is_not_scaled shows it fails the tolerance.
SGD_TOLERANCE = 1e-5


@pytest.mark.full
@pytest.mark.parametrize("strategy", [pytest.param("ddp", marks=pytest.mark.versions), "ddp_spawn"])
def test_two_processes_at_b_match_one_at_2b_in_one_wandb_run(strategy, single_2b, mnist_root, tmp_path):
    args = [*CPU2, f"--trainer.strategy={strategy}", "--data.batch_size=64", "--model.optimizer.lr=0.01"]
    fit_logged_to_wandb(
        tmp_path, *args, f"--data.root={mnist_root}", "--test_after_fit=false", probe(tmp_path)
    )
    start = [load_probe(tmp_path, "start", r)["weights"] for r in (0, 1)]
    end = [load_probe(tmp_path, "end", r) for r in (0, 1)]
    assert max_difference(*start) == 0, "ranks started from different weights"
    assert end[0]["global_step"] == end[1]["global_step"] == single_2b["global_step"] == 4
    assert max_difference(end[0]["weights"], end[1]["weights"]) == 0
    assert max_difference(end[0]["weights"], single_2b["weights"]) < SGD_TOLERANCE
    assert max_difference(end[0]["weights"], start[0]) > 1e-3  # it trained


def test_the_tolerance_fails_a_run_whose_lr_is_not_scaled(single_2b, mnist_root, tmp_path_factory):
    """The control: one process at the lr 2 processes would have without the world-size scaling."""
    unscaled = single_fit(mnist_root, tmp_path_factory, lr=0.01)
    assert max_difference(unscaled["weights"], single_2b["weights"]) > 10 * SGD_TOLERANCE


@pytest.mark.full
def test_uneven_shards_take_the_same_steps_and_evaluation_counts_every_sample_once(mnist_root, tmp_path):
    """301 training samples, batch 64: shards of 151 and 150 (padded to 151), 3 steps an epoch on each
    rank; lr scaled by the square root of the world size (the modes' arithmetic is in
    tests/models/test_training.py). Odd val (339) and test (251) sets: padding would count a sample twice
    and shift the accuracy, so one process evaluating the same checkpoints must log what the two did.

    The one-process evaluations run the ddp checkpoints under dp (one process on CPU, DataParallel's
    code path), which also shows that checkpoints move from ddp to dp."""
    data = [f"--data.root={mnist_root}", "--data.val_size=339"]
    args = [*CPU2, "--trainer.strategy=ddp", "--data.batch_size=64", "--trainer.limit_train_batches=1.0"]
    args += ["--trainer.max_epochs=2", "--model.lr_scaling=sqrt", "--model.optimizer.lr=0.01"]
    args.append("--trainer.callbacks+=LearningRateMonitor")
    result = run_process("fit", *args, *data, probe(tmp_path / "probe"), cwd=tmp_path)
    check(result)
    end = [load_probe(tmp_path / "probe", "end", rank)["global_step"] for rank in (0, 1)]
    assert end == [6, 6]
    assert "with sqrt scaling to world size 2" in result.stderr + result.stdout
    run = run_folder(tmp_path)
    ddp = logged(run)
    assert ddp["lr-SGD"][0] == pytest.approx(0.01 * 2**0.5)

    # dp where the optional part is there (README, "Make it yours"); one process either way.
    one_process = "dp" if importlib.util.find_spec("app.dp") else "auto"
    # The last validation saw the last weights; the test after fit, the best checkpoint's.
    (best,) = (run / "checkpoints").glob("best-*.ckpt")
    for subcommand, ckpt in (("validate", run / "checkpoints" / "last.ckpt"), ("test", best)):
        single = [*CPU2, f"--trainer.strategy={one_process}", f"--ckpt_path={ckpt}", *data]
        check(run_app(subcommand, *single, configs=(str(run / "config.yaml"),), cwd=tmp_path))
        alone = logged(run)
        stage = "val" if subcommand == "validate" else "test"
        assert alone[f"{stage}/acc"][-1] == ddp[f"{stage}/acc"][-1]
        assert alone[f"{stage}/loss"][-1] == pytest.approx(ddp[f"{stage}/loss"][-1], rel=1e-6)


def torchrun(*options: str) -> tuple[str, ...]:
    return ("-m", "torch.distributed.run", f"--master_port={free_port()}", *options)


@pytest.mark.full
@pytest.mark.versions  # make test-lowest
def test_torchrun_launches_the_same_training_in_one_wandb_run(single_2b, mnist_root, tmp_path):
    """torchrun starts the 2 processes itself; Lightning must join them, not launch its own."""
    args = [*CPU2, "--trainer.strategy=ddp", "--data.batch_size=64", "--model.optimizer.lr=0.01"]
    args += [f"--data.root={mnist_root}", "--test_after_fit=false", probe(tmp_path)]
    output = fit_logged_to_wandb(tmp_path, *args, launcher=torchrun("--nproc_per_node=2"))
    assert output.count("Initializing distributed: GLOBAL_RANK") == 2
    end = [load_probe(tmp_path, "end", r) for r in (0, 1)]
    assert end[0]["world_size"] == 2 and max_difference(end[0]["weights"], end[1]["weights"]) == 0
    assert max_difference(end[1]["weights"], single_2b["weights"]) < SGD_TOLERANCE


@pytest.mark.full
def test_torchrun_world_size_mismatch_is_one_clear_line(mnist_root, tmp_path):
    """One process started by torchrun, two asked of Lightning."""
    args = [*CPU2, "--trainer.strategy=ddp", f"--data.root={mnist_root}"]
    result = run_process("fit", *args, launcher=torchrun("--nproc_per_node=1"), cwd=tmp_path)
    assert result.returncode != 0
    # torchrun reports the failed child with a traceback of its own; ours never shows.
    frames = [line for line in result.stderr.splitlines() if line.strip().startswith('File "')]
    assert not [frame for frame in frames if "/app/" in frame or "lightning" in frame]
    assert "error: You set `devices=2` and `num_nodes=1` in Lightning" in result.stderr


@pytest.mark.full
def test_two_nodes_on_loopback_end_with_the_same_weights(mnist_root, tmp_path):
    port = free_port()
    args = [
        "--trainer.accelerator=cpu",
        "--trainer.devices=1",
        "--trainer.num_nodes=2",
        "--trainer.strategy=ddp",
    ]
    args += [f"--data.root={mnist_root}", "--test_after_fit=false", probe(tmp_path / "probe")]
    nodes = []
    for node_rank in (0, 1):
        launcher = (
            "-m",
            "torch.distributed.run",
            "--nnodes=2",
            f"--node_rank={node_rank}",
            "--nproc_per_node=1",
        )
        launcher += ("--master_addr=127.0.0.1", f"--master_port={port}")
        command = app_command("fit", *args, launcher=launcher)
        output = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        nodes.append(subprocess.Popen(command, cwd=tmp_path, env=app_env(), **output))
    for node in nodes:
        output, _ = node.communicate(timeout=300)
        assert node.returncode == 0, output[-3000:]
    end = [load_probe(tmp_path / "probe", "end", rank) for rank in (0, 1)]
    assert end[0]["world_size"] == end[1]["world_size"] == 2
    assert end[0]["global_step"] == end[1]["global_step"] > 0
    assert max_difference(end[0]["weights"], end[1]["weights"]) == 0


def test_fsdp_on_cpu_is_one_clear_line(tmp_path):
    result = run_app("fit", *CPU2, "--trainer.strategy=fsdp", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "error: The strategy `fsdp` requires a GPU accelerator" in result.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="FSDP needs a GPU")
@pytest.mark.parametrize("net", ["MnistCNN", "ResNet"])
def test_fsdp_trains_our_modules_on_gpu(net, mnist_root, tmp_path):
    devices = f"--trainer.devices={min(2, torch.cuda.device_count())}"
    args = ["--trainer.accelerator=gpu", devices, "--trainer.strategy=fsdp", f"--model.net={net}"]
    check(run_process("fit", *args, f"--data.root={mnist_root}", cwd=tmp_path))
    assert 0 <= logged(run_folder(tmp_path))["test/acc"][-1] <= 1
