"""``python -m app`` as users run it: a real subprocess on data in the real formats."""

import gzip
import hashlib
import textwrap
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers.cli import ROOT, check, logged, run_app, run_folder
from torchvision.datasets import MNIST

PRESETS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "configs").glob("*.yaml"))


def test_fit_saves_checkpoints_that_test_validate_and_predict_reload(mnist_root, tmp_path):
    check(run_app("fit", f"--data.root={mnist_root}", cwd=tmp_path))
    run = run_folder(tmp_path)
    checkpoints = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert checkpoints[-1] == "last.ckpt" and checkpoints[0].startswith("best-epoch00")
    fit_metrics = logged(run)
    assert {"train/loss", "val/loss", "val/acc", "test/loss", "test/acc"} <= fit_metrics.keys()

    best = run / "checkpoints" / checkpoints[0]
    check(run_app("test", f"--ckpt_path={best}", configs=(str(run / "config.yaml"),), cwd=tmp_path))
    # fit ends by testing its best checkpoint: the reloaded one scores exactly the same; an
    # evaluation of a run's checkpoint logs to that run.
    assert logged(run)["test/acc"] == fit_metrics["test/acc"] * 2
    check(run_app("validate", f"--ckpt_path={best}", configs=(str(run / "config.yaml"),), cwd=tmp_path))
    assert logged(run)["val/acc"] == fit_metrics["val/acc"] * 2
    assert not (tmp_path / "runs" / run.parent.name / "version_1").exists()
    check(run_app("predict", f"--ckpt_path={best}", configs=(str(run / "config.yaml"),), cwd=tmp_path))


@pytest.mark.parametrize(
    ("configs", "args", "root"),
    [
        (("configs/cifar10.yaml",), ["--data.verify=false"], "cifar10_root"),
        # configs/cifar10_resnet.yaml trains in test_a_checkpoint_is_evaluated_with_the_config_of_its_run.
        ((), ["--data=CIFAR100DataModule", "--data.verify=false", "--model.net=CifarCNN"], "cifar100_root"),
        (
            (),
            [
                "--data=ImageFolderDataModule",
                "--data.batch_size=16",  # of 29 training images
                "--model.net=ResNet",
                "--model.net.depth=8",
            ],
            "image_folder_root",
        ),
        (("configs/fashion_mnist.yaml",), ["--model.net=CifarCNN"], "fashion_mnist_root"),
        (("configs/fashion_mnist_93.yaml",), [], "fashion_mnist_root"),
    ],
)
def test_any_net_trains_on_any_dataset(configs, args, root, request, tmp_path):
    data_root = request.getfixturevalue(root)
    check(run_app("fit", *args, f"--data.root={data_root}", configs=configs, cwd=tmp_path))
    assert 0 <= logged(run_folder(tmp_path))["test/acc"][-1] <= 1


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_parses(preset, tmp_path):
    result = run_app("fit", "--print_config", configs=(preset,), shrink=False, cwd=tmp_path)
    check(result)
    assert "class_path: data." in result.stdout and "class_path: models." in result.stdout


def test_presets_stack(tmp_path):
    result = run_app(
        "fit",
        "--print_config",
        configs=("configs/cifar10_resnet.yaml", "configs/ddp.yaml"),
        shrink=False,
        cwd=tmp_path,
    )
    check(result)
    assert "class_path: models.ResNet" in result.stdout and "strategy: ddp" in result.stdout
    assert "sync_batchnorm: true" in result.stdout


def test_print_config_round_trips(tmp_path):
    first = run_app(
        "fit",
        "--print_config",
        "--model.optimizer.lr=0.2",
        "--data.val_size=0.2",  # PositiveInt | OpenUnitInterval: not written as 0
        configs=("configs/cifar10_resnet.yaml",),
        shrink=False,
        cwd=tmp_path,
    )
    check(first)
    saved = tmp_path / "printed.yaml"
    saved.write_text(first.stdout)
    second = run_app("fit", "--print_config", configs=(str(saved),), shrink=False, cwd=tmp_path)
    check(second)
    assert second.stdout == first.stdout and "lr: 0.2" in first.stdout and "val_size: 0.2" in first.stdout


def test_fit_downloads_missing_data(mnist_root, tmp_path, monkeypatch):
    """The default ``--data.download true``, through torchvision's own download code, from a mirror
    on this machine that serves the gzipped files over HTTP (no network here); fit then trains and tests."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    resources = []
    for raw in sorted((mnist_root / "MNIST" / "raw").iterdir()):
        packed = mirror / f"{raw.name}.gz"
        packed.write_bytes(gzip.compress(raw.read_bytes()))
        resources.append((packed.name, hashlib.md5(packed.read_bytes()).hexdigest()))
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=mirror))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setattr(MNIST, "mirrors", [f"http://127.0.0.1:{server.server_port}/"])
    monkeypatch.setattr(MNIST, "resources", resources)
    try:
        check(run_app("fit", f"--data.root={tmp_path / 'fresh'}", cwd=tmp_path))
    finally:
        server.shutdown()
    fetched = tmp_path / "fresh" / "MNIST" / "raw"
    for raw in (mnist_root / "MNIST" / "raw").iterdir():
        assert (fetched / raw.name).read_bytes() == raw.read_bytes()
    assert "test/acc" in logged(run_folder(tmp_path))


def test_missing_data_is_one_clear_line(tmp_path):
    result = run_app("fit", f"--data.root={tmp_path / 'empty'}", "--data.download=false", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: MNIST not found in ") and "--data.download true" in last


def test_more_gpus_than_present_is_one_clear_line(tmp_path):
    result = run_app("fit", "--trainer.accelerator=gpu", "--trainer.devices=2", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "gpu" in last.lower()


@pytest.mark.part("app.progress_bar")
def test_progress_bar_shows_images_per_second(mnist_root, tmp_path):
    """Ours redraws every 50 steps (Lightning's redraws every step) and counts images, not batches."""
    result = run_app("fit", f"--data.root={mnist_root}", "--trainer.enable_progress_bar=true", cwd=tmp_path)
    check(result)
    output = result.stdout + result.stderr
    assert "━" in output and " img/s" in output and "it/s" not in output


def test_a_checkpoint_is_evaluated_with_the_config_of_its_run(cifar10_root, tmp_path):
    """No --config: `test --ckpt_path` reads the run's config.yaml, so the ResNet of
    configs/cifar10_resnet.yaml on CIFAR-10 stays one."""
    data = [f"--data.root={cifar10_root}", "--data.verify=false"]
    net = "--model.net.depth=8"
    check(run_app("fit", *data, net, configs=("configs/cifar10_resnet.yaml",), cwd=tmp_path))
    run = run_folder(tmp_path)
    best = next((run / "checkpoints").glob("best-*.ckpt"))
    check(run_app("test", f"--ckpt_path={best}", *data, cwd=tmp_path))
    first, again = logged(run)["test/acc"]
    assert 0 <= first <= 1 and again == first


NETS_SHARING_AN_ARGUMENT = """
    from torch import nn

    from models import Net


    class Narrow(Net):
        def __init__(self, in_channels=1, num_classes=10, image_size=28, width: int = 4) -> None:
            super().__init__()
            self.head = nn.Linear(in_channels * image_size**2, num_classes)


    class Wide(Narrow):
        def __init__(self, in_channels=1, num_classes=10, image_size=28, width: int = 64) -> None:
            super().__init__(in_channels, num_classes, image_size, width)
"""


@pytest.mark.part("data.image_folder")  # the DataModule whose defaults differ from MNIST's
def test_switching_the_class_gives_its_own_defaults(tmp_path, monkeypatch):
    # defaults.yaml names MNISTDataModule: its val_size 5000 and root datasets are not the user's.
    result = run_app("fit", "--data=ImageFolderDataModule", "--print_config", shrink=False, cwd=tmp_path)
    check(result)
    assert "root: datasets/images" in result.stdout and "val_size: 0.1" in result.stdout
    # What the user sets before the switch stays; the old class's defaults do not.
    (tmp_path / "two_nets.py").write_text(textwrap.dedent(NETS_SHARING_AN_ARGUMENT))
    monkeypatch.syspath_prepend(str(tmp_path))
    preset = tmp_path / "narrow.yaml"
    preset.write_text("model:\n  net: two_nets.Narrow\n")
    for given, width in (([], 64), (["--model.net.width=8"], 8)):
        args = ["--data.batch_size=7", *given, "--model.net=two_nets.Wide", "--data=ImageFolderDataModule"]
        result = run_app("fit", *args, "--print_config", configs=(str(preset),), shrink=False, cwd=tmp_path)
        check(result)
        assert f"width: {width}\n" in result.stdout and "batch_size: 7\n" in result.stdout
        assert "val_size: 0.1" in result.stdout


def test_without_a_monitor_the_kept_checkpoint_and_the_last_line_say_it_is_the_latest(mnist_root, tmp_path):
    result = run_app("fit", f"--data.root={mnist_root}", "--checkpoint.monitor=null", cwd=tmp_path)
    check(result)
    (kept,) = (run_folder(tmp_path) / "checkpoints").glob("latest-*.ckpt")
    assert kept.name == "latest-epoch00-step4.ckpt"
    done = result.stderr.strip().splitlines()[-1]
    assert done.startswith(f"done: latest checkpoint {kept.name} (no --checkpoint.monitor), test/acc ")
