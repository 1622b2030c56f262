"""Making the template yours: new networks, DataModules and presets reach the CLI with no other edit."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.cli import ROOT, SHRINK, app_command, app_env, check, logged, run_app, run_folder
from helpers.data_files import write_photo_folder

TINY_NET = """
    from torch import nn

    from models.nets.net import Net


    class {name}(Net):
        def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28) -> None:
            super().__init__()
            self.layers = nn.Sequential(nn.Flatten(), nn.Linear(in_channels * image_size**2, num_classes))

        def forward(self, x):
            return self.layers(x)
"""

# A VisionDataModule over torchvision's MNIST reader: the documented way to add a data set.
VISION_DATA = """
    from torchvision.datasets import MNIST

    from data import VisionDataModule


    class MyData(VisionDataModule):
        num_classes, in_channels, image_size = 10, 1, 28
        mean, std = (0.5,), (0.5,)

        def load(self, train: bool):
            return MNIST(self.root, train=train)
"""

# Any LightningDataModule that exposes the three sizes the CLI links into the network.
PLAIN_DATA = """
    import torch
    from lightning import LightningDataModule
    from torch.utils.data import DataLoader, TensorDataset


    class MyDataModule(LightningDataModule):
        num_classes, in_channels, image_size = 3, 3, 8

        def __init__(self, n: int = 48) -> None:
            super().__init__()
            images = torch.randn(n, self.in_channels, self.image_size, self.image_size)
            self.dataset = TensorDataset(images, torch.arange(n) % self.num_classes)

        def train_dataloader(self):
            return DataLoader(self.dataset, batch_size=16, shuffle=True)

        def val_dataloader(self):
            return DataLoader(self.dataset, batch_size=16)

        test_dataloader = val_dataloader
"""


def write(path: Path, source: str, **names: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source.format(**names) if names else source))


def run_app_with(
    path: Path, subcommand: str, *args: str, cwd: Path, **options
) -> subprocess.CompletedProcess:
    """``python -m app`` with ``path`` first on PYTHONPATH (a process of its own: ``path`` may hold
    other ``app``, ``models`` and ``data`` packages than the ones imported here)."""
    env = app_env()
    env["PYTHONPATH"] = f"{path}{os.pathsep}{env['PYTHONPATH']}"
    command = app_command(subcommand, *args, **options)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_classes_in_any_module_train_by_class_path(mnist_root, tmp_path, monkeypatch):
    write(tmp_path / "src" / "mymod.py", TINY_NET + VISION_DATA, name="TinyNet")
    monkeypatch.syspath_prepend(tmp_path / "src")
    monkeypatch.delitem(sys.modules, "mymod", raising=False)
    args = ["--model.net=mymod.TinyNet", "--data=mymod.MyData", f"--data.root={mnist_root}"]
    result = run_app("fit", *args, cwd=tmp_path)
    check(result)
    run = run_folder(tmp_path)
    assert 0 <= logged(run)["test/acc"][-1] <= 1
    config = (run / "config.yaml").read_text()
    assert "class_path: mymod.TinyNet" in config and "class_path: mymod.MyData" in config


@pytest.mark.full
@pytest.mark.parametrize("named", ["by_path", "by_short_name"])
def test_files_added_to_the_packages_train_by_path_or_once_imported_by_short_name(named, tmp_path):
    project = tmp_path / "project"
    for package in ("app", "models", "data", "configs"):
        shutil.copytree(ROOT / package, project / package, ignore=shutil.ignore_patterns("__pycache__"))
    write(project / "models" / "nets" / "my_net.py", TINY_NET, name="MyNet")
    write(project / "data" / "my_data.py", PLAIN_DATA)
    classes = ["--model.net=models.nets.my_net.MyNet", "--data=data.my_data.MyDataModule"]
    if named == "by_short_name":
        # The one line each that the README gives: the short names are the classes imported there.
        with open(project / "models" / "nets" / "__init__.py", "a") as init:
            init.write("from models.nets.my_net import MyNet as MyNet\n")
        with open(project / "data" / "__init__.py", "a") as init:
            init.write("from data.my_data import MyDataModule as MyDataModule\n")
        classes = ["--model.net=MyNet", "--data=MyDataModule"]
    trainer_only = [arg for arg in SHRINK if not arg.startswith("--data.")]
    result = run_app_with(project, "fit", *trainer_only, *classes, shrink=False, cwd=tmp_path)
    # MyNet's defaults fit 1x28x28 images: training on 3x8x8 ones shows the sizes were linked in.
    check(result)
    run = run_folder(tmp_path)
    assert 0 <= logged(run)["test/acc"][-1] <= 1
    config = (run / "config.yaml").read_text()
    # jsonargparse writes the shortest import path: the package's, once it imports the class.
    paths = ["models.nets.my_net.MyNet", "data.my_data.MyDataModule"]
    if named == "by_short_name":
        paths = ["models.nets.MyNet", "data.MyDataModule"]
    assert all(f"class_path: {path}\n" in config for path in paths)


def example(file: str) -> str:
    """``docs/examples/FILE``: an example the README shows."""
    return (ROOT / "docs" / "examples" / file).read_text()


def test_the_readme_data_set_example_reads_photos_of_any_size(tmp_path, monkeypatch):
    # docs/examples/my_data.py (5 classes at 64 px) over photos of mixed sizes and modes.
    photos = write_photo_folder(tmp_path / "photos", classes=5, per_class=4)
    write(tmp_path / "src" / "my_data.py", example("my_data.py"))
    monkeypatch.syspath_prepend(tmp_path / "src")
    monkeypatch.delitem(sys.modules, "my_data", raising=False)
    args = ["--data=my_data.MyData", f"--data.root={photos}", "--data.batch_size=8"]
    check(run_app("fit", *args, "--model.net=FastCNN", cwd=tmp_path))
    assert 0 <= logged(run_folder(tmp_path))["test/acc"][-1] <= 1
    # A wrong --data.root: torchvision's ImageFolder raises FileNotFoundError, reported in one line.
    args[1] = f"--data.root={tmp_path / 'nowhere'}"
    missing = run_app("fit", *args, "--model.net=FastCNN", cwd=tmp_path)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert (
        missing.stderr.strip().splitlines()[-1]
        == f"error: No such file or directory: {tmp_path}/nowhere/train"
    )


def test_a_new_preset_stacks_and_trains(mnist_root, tmp_path):
    preset = tmp_path / "my_preset.yaml"
    preset.write_text(
        textwrap.dedent("""
            # MNIST with the CIFAR network and a larger lr.
            model:
              net: CifarCNN
              optimizer:
                init_args:
                  lr: 0.05
            data:
              batch_size: 32
        """)
    )
    configs = ("configs/mnist.yaml", str(preset))
    printed = run_app("fit", "--print_config", configs=configs, shrink=False, cwd=tmp_path)
    check(printed)
    assert "class_path: models.CifarCNN" in printed.stdout and "lr: 0.05" in printed.stdout
    assert "class_path: data.MNISTDataModule" in printed.stdout and "batch_size: 32" in printed.stdout

    check(run_app("fit", f"--data.root={mnist_root}", configs=configs, cwd=tmp_path))
    run = run_folder(tmp_path)
    assert 0 <= logged(run)["test/acc"][-1] <= 1
    assert "lr: 0.05" in (run / "config.yaml").read_text()


def test_the_readme_network_example_trains_as_printed(mnist_root, tmp_path, monkeypatch):
    # A plain nn.Module without image_size: the CLI passes only the sizes its __init__ takes.
    write(tmp_path / "src" / "my_net.py", example("my_net.py"))
    monkeypatch.syspath_prepend(tmp_path / "src")
    monkeypatch.delitem(sys.modules, "my_net", raising=False)
    args = ["--model.net=my_net.MyNet", "--model.net.width=8", f"--data.root={mnist_root}"]
    check(run_app("fit", *args, cwd=tmp_path))
    run = run_folder(tmp_path)
    assert 0 <= logged(run)["test/acc"][-1] <= 1
    assert "class_path: my_net.MyNet" in (run / "config.yaml").read_text()
