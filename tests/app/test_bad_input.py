"""Bad input ends in one line on stderr that names the culprit and the fix, a non-zero exit, no traceback.

Every case runs ``python -m app`` as a user would; files that are bad input are left as they were.
"""

import shutil

import pytest
import torch
from helpers.cli import callback, check, run_app, run_process
from helpers.data_files import corrupt_jpeg, write_cifar, write_image_folder, write_mnist, write_photo_folder

from models import MnistCNN

CPU2_DDP = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]
# The cases on the image-folder part's DataModule.
IMAGE_FOLDER = pytest.mark.part("data.image_folder")
IMAGE_FOLDER_FLAG = "--data=ImageFolderDataModule"


def error_line(result) -> str:
    """The line the user is told: checks that the run failed cleanly, and returns its last stderr line."""
    assert result.returncode != 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "usage:" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), result.stderr[-3000:]
    return last


def test_a_cut_mnist_file_is_named_not_downloaded_over(tmp_path):
    path = write_mnist(tmp_path / "data") / "MNIST" / "raw" / "train-images-idx3-ubyte"
    cut = path.read_bytes()[:200_000]
    path.write_bytes(cut)
    # --data.download is on (the default): the file is there, so nothing may be fetched over it.
    line = error_line(run_app("fit", f"--data.root={tmp_path / 'data'}", cwd=tmp_path))
    assert line == (
        f"error: {path} is damaged (200000 bytes where its header announces 501776): delete it and run "
        "again to download it anew (--data.download true), or copy an intact one there"
    )
    assert path.read_bytes() == cut


def test_a_cut_cifar_batch_is_named(tmp_path):
    path = write_cifar(tmp_path / "data") / "cifar-10-batches-py" / "data_batch_2"
    path.write_bytes(path.read_bytes()[:5000])
    args = ["--data=CIFAR10DataModule", f"--data.root={tmp_path / 'data'}", "--data.verify=false"]
    line = error_line(run_app("fit", *args, "--model.net=CifarCNN", cwd=tmp_path))
    assert line.startswith(f"error: {path} is damaged (not a whole pickle: ") and "delete it" in line


def test_a_cifar_checksum_mismatch_is_one_line_and_overwrites_nothing(tmp_path):
    folder = write_cifar(tmp_path / "data") / "cifar-10-batches-py"  # our own pickles: other md5 sums
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    args = ["--data=CIFAR10DataModule", f"--data.root={tmp_path / 'data'}", "--model.net=CifarCNN"]
    line = error_line(run_app("fit", *args, cwd=tmp_path))
    assert line.startswith(f"error: {folder / 'data_batch_1'} is damaged (not the official CIFAR-10 file")
    assert line.endswith("if you re-packed the batches yourself, pass --data.verify false")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


@IMAGE_FOLDER
@pytest.mark.parametrize(("loader", "workers"), [("torch", 0), ("torch", 1), ("resident", 0)])
def test_an_unreadable_image_is_named(loader, workers, tmp_path):
    """With workers the DataLoader re-raises the error with the worker's traceback as its message;
    the resident loader meets it when it decodes the folder, before training."""
    root = write_image_folder(tmp_path / "images")
    bad = root / "train" / "class_1" / "broken.png"
    bad.write_bytes(b"not a png")
    args = ["--data=ImageFolderDataModule", f"--data.root={root}", "--data.batch_size=8"]
    args += [f"--data.loader={loader}", f"--data.num_workers={workers}"]
    line = error_line(run_app("fit", *args, cwd=tmp_path))
    expected = f"error: cannot read the image {bad} (not an image format PIL reads): delete or replace it"
    # Decoded each epoch, it can be left out instead (the resident loader decodes all at once).
    skip = ", or pass --data.skip_unreadable true to leave such images out"
    assert line == expected + (skip if loader == "torch" else "")


@IMAGE_FOLDER
@pytest.mark.parametrize(("split", "loader"), [("train", "torch"), ("test", "resident")])
def test_a_cut_jpeg_in_any_split_is_named(split, loader, tmp_path):
    root = write_photo_folder(tmp_path / "photos", per_class=4)
    bad = corrupt_jpeg(root / split / "class_2" / "cut.jpg")
    args = ["--data=ImageFolderDataModule", f"--data.root={root}", "--data.batch_size=4", "--data.val_size=2"]
    line = error_line(run_app("fit", *args, f"--data.loader={loader}", cwd=tmp_path))
    assert line.startswith(f"error: cannot read the image {bad} (damaged or cut short: ")
    skip = ", or pass --data.skip_unreadable true to leave such images out"
    assert line.endswith("delete or replace it" + (skip if loader == "torch" else ""))


@IMAGE_FOLDER
@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ({}, "no class folders in {train}: put your images in {train}/<class name>/"),
        ({"cat": 3}, "only one class folder in {train} (cat): a classifier needs two or more"),
        ({"cat": 3, "dog": 0}, "{train}: Found no valid file for the classes dog."),
    ],
)
def test_an_image_folder_without_classes_or_images_is_one_line(layout, expected, tmp_path):
    train = tmp_path / "images" / "train"
    train.mkdir(parents=True)
    for name, count in layout.items():
        (train / name).mkdir()
        for i in range(count):
            (train / name / f"{i}.png").touch()  # never read: the layout is refused first
    args = ["--data=ImageFolderDataModule", f"--data.root={tmp_path / 'images'}", "--data.batch_size=2"]
    # No test/ here: without a test at the end, fit does not look for one (see the test split tests).
    line = error_line(run_app("fit", *args, "--test_after_fit=false", cwd=tmp_path))
    assert line.startswith("error: " + expected.format(train=train))


@pytest.mark.parametrize(
    ("args", "share"),
    [
        ([], "512 samples (512 over 1 process)"),
        pytest.param(
            CPU2_DDP, "256 samples (512 over 2 processes)", marks=[pytest.mark.distributed, pytest.mark.full]
        ),
    ],
)
def test_a_batch_larger_than_a_process_share_is_one_line(args, share, mnist_root, tmp_path):
    """640 samples, 128 of them held out for validation: 512 to train on, split over the processes."""
    run_cli = run_process if args else run_app
    result = run_cli("fit", *args, f"--data.root={mnist_root}", "--data.batch_size=1000", cwd=tmp_path)
    size = share.split()[0]
    assert error_line(result) == (
        f"error: --data.batch_size 1000 is larger than the training set of each process: {share}; "
        f"pass --data.batch_size {size} or less"
    )


@pytest.mark.parametrize(
    ("args", "config", "expected"),
    [
        (["--trainer.devices=0"], None, "error: `Trainer(devices='0')` value is not a valid input"),
        (
            ["--model.label_smothing=0.1"],
            None,
            "error: unrecognized arguments: --model.label_smothing=0.1; close: --model.label_smoothing",
        ),
        (
            ["--trainer.devics=2"],
            None,
            "error: unrecognized arguments: --trainer.devics=2; close: --trainer.devices",
        ),
        (["--model.zzz=1"], None, "error: unrecognized arguments: --model.zzz=1"),
        pytest.param(
            ["--data=ImageFolderDataModule", "--data.imagesize=64"],
            None,
            ("ImageFolderDataModule", "'imagesize'"),
            marks=IMAGE_FOLDER,
        ),
        (["--data.batch_size=abc"], None, ("batch_size", "abc")),
        ([], "model:\n  lr: [0.1\n", ("line 2",)),
        ([], "model:\n  lr_scalng: sqrt\n", ("model.lr_scalng",)),
        ([], "model:\n  label_smoothing: -0.1\n", ("label_smoothing", "-0.1")),
    ],
    ids=[
        "devices=0",
        "unknown-flag",
        "unknown-trainer-flag",
        "unknown-flag-nothing-close",
        "unknown-class-option",
        "wrong-type",
        "bad-yaml",
        "config-key-typo",
        "config-out-of-range",
    ],
)
def test_a_bad_flag_or_config_is_one_line(args, config, expected, tmp_path):
    """Our lines whole; jsonargparse's own (a tuple: what they must name), folded to one line."""
    if config is not None:
        (tmp_path / "my.yaml").write_text(config)
        args = [*args, f"--config={tmp_path / 'my.yaml'}"]
    result = run_app("fit", *args, shrink=False, cwd=tmp_path)
    if isinstance(expected, tuple):
        assert all(part in error_line(result) for part in expected), error_line(result)
    else:
        assert error_line(result).startswith(expected)
    if "close" in expected or "zzz" in expected:  # the whole line: no other guesses
        assert error_line(result) == expected
    if config is not None or args[0].startswith(("--model", "--data")):
        assert result.stderr.strip() == error_line(result)  # jsonargparse's usage is not printed


def test_a_value_a_class_rejects_is_one_line(tmp_path):
    result = run_app("fit", "--model.net=ResNet", "--model.net.depth=10", shrink=False, cwd=tmp_path)
    assert result.returncode == 1
    assert error_line(result) == "error: ResNet depth must be 6n + 2 with n >= 1 (8, 14, 20, ...), got 10"


# The parser checks these through the parameters' types (--help shows them): its line names the key and value.
OUT_OF_RANGE = [
    ("--data.batch_size=0", "an integer > 0"),
    ("--data.batch_size=-8", "an integer > 0"),
    ("--data.num_workers=-1", "an integer >= 0 or null"),
    ("--data.val_size=0", "an integer > 0 or a number in (0, 1)"),
    ("--data.val_size=1.5", "an integer > 0 or a number in (0, 1)"),
    ("--data.val_size=-0.2", "an integer > 0 or a number in (0, 1)"),
    ("--model.scheduler.final_lr_ratio=1.5", "a number in [0, 1]"),
    ("--model.scheduler.warmup_ratio=1", "a number in [0, 1)"),
    ("--model.scheduler.warmup_ratio=-0.1", "a number in [0, 1)"),
    ("--model.label_smoothing=1", "a number in [0, 1)"),
    ("--model.mixup_alpha=0", "a number > 0 or null"),
    ("--model.cutmix_alpha=-1", "a number > 0 or null"),
    ("--model.norm_weight_decay=-1e-4", "a number >= 0 or null"),
    ("--model.lr_scaling=cubic", "one of 'none', 'linear', 'sqrt'"),
    ("--last_checkpoint.every_n_steps=-1", "an integer >= 0"),
    ("--trainer.collective_timeout=0", "an integer > 0"),
    ("--trainer.accumulate_grad_batches=0", "an integer > 0"),
    ("--trainer.check_val_every_n_epoch=0", "an integer > 0 or null"),
    ("--trainer.log_every_n_steps=-1", "an integer >= 0 or null"),
    ("--trainer.gradient_clip_val=-1", "a number >= 0 or null"),
]


@pytest.mark.parametrize(("flag", "allowed"), OUT_OF_RANGE, ids=[flag for flag, _ in OUT_OF_RANGE])
def test_a_value_out_of_its_range_is_one_line_before_anything_runs(flag, allowed, tmp_path):
    result = run_app("fit", flag, shrink=False, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == error_line(result)  # refused by the parser: nothing else printed
    name, value = flag.split("=")
    assert name.rsplit(".", 1)[-1] in error_line(result) and value in error_line(result)


def test_help_shows_the_ranges(tmp_path):
    text = run_app("fit", "--help", shrink=False, cwd=tmp_path).stdout
    for flag, kind in [
        ("model.label_smoothing", "RightOpenUnitInterval"),
        ("model.mixup_alpha", "PositiveFloat | null"),
        ("trainer.collective_timeout", "PositiveInt"),
    ]:
        entry = text.split(f"\n  --{flag} ")[1].split("\n  --")[0]
        assert f"(type: {kind}," in " ".join(entry.split()), entry


# A chosen class's own flags, and what Lightning's Trainer (or ours) refuses when it is built.
REFUSED_LATER = [
    (["--model.net=FastCNN", "--model.net.width=0"], ('"width"', "0")),
    (["--model.net=ResNet", "--model.net.width=-16"], ('"width"', "-16")),
    (["--data=ImageFolderDataModule", "--data.image_size=0"], ('"image_size"', "0")),
    (["--data=ImageFolderDataModule", "--data.crop_ratio=1.5"], ('"crop_ratio"', "1.5")),
    (
        ["--data=ImageFolderDataModule", "--data.crop_scale=[1.5, 2]"],
        "--data.crop_scale must be two numbers 0 < low <= high <= 1, got [1.5, 2.0]",
    ),
    (["--data=ImageFolderDataModule", "--data.crop_scale=0.5"], ('"crop_scale"', "0.5")),
    (["--data=ImageFolderDataModule", "--data.crop_scale=[0.5]"], ('"crop_scale"', "0.5")),
    (["--data=ImageFolderDataModule", "--data.mean=0.5"], ('"mean"', "0.5")),
    (
        ["--data=ImageFolderDataModule", "--data.std=[0.5]"],
        "--data.std needs 3 values (one a channel), got [0.5]",
    ),
    (["--trainer.max_epochs=-5"], "`max_epochs` must be a non-negative integer or -1"),
    (["--trainer.max_steps=-5"], "`max_steps` must be a non-negative integer or -1"),
    (["--trainer.num_nodes=0"], "`num_nodes` must be a positive integer, but got 0"),
    (["--trainer.devices=-2"], "`devices` selected with `CPUAccelerator` should be an int > 0"),
    (["--trainer.limit_train_batches=-1"], "You have passed invalid value -1 for limit_train_batches"),
    (["--trainer.limit_val_batches=1.5"], "You have passed invalid value 1.5 for limit_val_batches"),
    (["--trainer.val_check_interval=0"], "--trainer.val_check_interval must be a number of batches >= 1"),
]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(args, expected, id=args[-1], marks=[IMAGE_FOLDER] if IMAGE_FOLDER_FLAG in args else [])
        for args, expected in REFUSED_LATER
    ],
)
def test_a_bad_network_data_or_trainer_value_is_one_line(args, expected, tmp_path):
    result = run_app("fit", "--trainer.accelerator=cpu", *args, shrink=False, cwd=tmp_path)
    assert result.returncode == 1
    if isinstance(expected, tuple):  # jsonargparse's line: what it must name
        assert all(part in error_line(result) for part in expected), error_line(result)
    else:
        assert error_line(result).startswith(f"error: {expected}")


IMAGE_FOLDER_FIT = ["--data=ImageFolderDataModule", "--data.batch_size=8", "--model.net=CifarCNN"]


@IMAGE_FOLDER
def test_an_image_folder_test_split_is_checked_before_training(tmp_path):
    root = write_image_folder(tmp_path / "images")
    (root / "test" / "class_2").rename(root / "test" / "class_x")
    args = [*IMAGE_FOLDER_FIT, f"--data.root={root}"]
    args.append(callback("helpers.stops.SlowSteps", seconds=0, started=str(tmp_path / "spy")))
    line = error_line(run_app("fit", *args, cwd=tmp_path))
    assert "only in test/: class_x; only in train/: class_2" in line
    assert not (tmp_path / "spy").exists()  # not one training step ran
    assert not list(tmp_path.glob("runs/*/version_*"))  # and the start left no run folder


@IMAGE_FOLDER
@pytest.mark.parametrize("loader", ["resident", "torch"])
def test_an_image_folder_val_split_with_other_classes_is_one_line_before_anything(loader, tmp_path):
    """val/ is checked when the data is first read, whether fit tests or not: nothing decoded, nothing run."""
    root = write_image_folder(tmp_path / "images")
    shutil.copytree(root / "test", root / "val")
    (root / "val" / "class_0").rename(root / "val" / "class_x")
    shutil.copytree(root / "val" / "class_1", root / "val" / "class_y")
    args = [*IMAGE_FOLDER_FIT, f"--data.root={root}", f"--data.loader={loader}", "--test_after_fit=false"]
    args.append(callback("helpers.stops.SlowSteps", seconds=0, started=str(tmp_path / "spy")))
    result = run_app("fit", *args, cwd=tmp_path)
    assert result.returncode == 1
    assert error_line(result) == (
        f"error: the class folders of {root}/val differ from those of {root}/train "
        "(only in val/: class_x, class_y; only in train/: class_0): give both the same class folders"
    )
    assert not (tmp_path / "spy").exists() and not (root / ".cache").exists()
    assert not list(tmp_path.glob("runs/*/version_*"))


@IMAGE_FOLDER
def test_testing_on_a_val_split_that_is_not_there_is_one_line(tmp_path):
    root = write_image_folder(tmp_path / "images")
    line = error_line(
        run_app("fit", *IMAGE_FOLDER_FIT, f"--data.root={root}", "--data.test_on=val", cwd=tmp_path)
    )
    assert line == (
        f"error: --data.test_on val tests on {root}/val, which does not exist: put the validation images "
        "there, in train/'s class folders, or pass --data.test_on test"
    )
    assert not list(tmp_path.glob("runs/*/version_*"))


@IMAGE_FOLDER
def test_an_image_folder_without_test_trains_and_says_fit_ends_untested(tmp_path):
    """Many photo folders are only class folders: test/ is optional (`test` needs it, `predict` a folder)."""
    root = write_image_folder(tmp_path / "images")
    shutil.rmtree(root / "test")
    result = run_app("fit", *IMAGE_FOLDER_FIT, f"--data.root={root}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert "fit: ImageFolderDataModule has no test split: fit ends without a test" in output
    assert "done: best val/acc" in output and "test/acc" not in output
    checkpoint = next(tmp_path.glob("runs/*/version_0/checkpoints/last.ckpt"))
    line = error_line(run_app("test", f"--ckpt_path={checkpoint}", cwd=tmp_path))
    assert line.startswith(f"error: no class folders in {root}/test: put your images in {root}/test/")
    line = error_line(run_app("predict", f"--ckpt_path={checkpoint}", cwd=tmp_path))
    assert line == (
        "error: nothing to predict: pass --data.predict_dir FOLDER, the images to classify "
        f"(without it, predict reads {root}/test, which does not exist)"
    )


def test_weights_to_start_from_that_cannot_serve_are_one_line(tmp_path):
    """--model.init_from: a missing file, a file that is not weights, weights of another network."""
    (tmp_path / "notes.pt").write_text("not weights")
    torch.save(MnistCNN().state_dict(), tmp_path / "mnist.pt")
    cases = {
        "missing.pt": "error: --model.init_from {path}: no such file",
        "notes.pt": "error: --model.init_from {path}: cannot read it as weights (",
        "mnist.pt": "error: --model.init_from {path}: 1 of its 12 tensors fit FastCNN by name and shape; ",
    }
    for name, expected in cases.items():
        path = tmp_path / name
        args = ["--model.net=FastCNN", f"--model.init_from={path}"]
        assert error_line(run_app("fit", *args, cwd=tmp_path)).startswith(expected.format(path=path))
    assert not list(tmp_path.glob("runs/*/version_*"))


def test_a_freeze_pattern_matching_nothing_is_one_line(tmp_path):
    line = error_line(run_app("fit", "--model.freeze=[head.*, conv*]", cwd=tmp_path))
    assert line == (
        "error: --model.freeze 'conv*' matches no parameter of MnistCNN; its modules: features, features.0, "
        "features.1, features.2, features.3, features.4, features.5, features.6, ... (16 in all) "
        "(or 'backbone': all but the classifier)"
    )


# The recipe's classes, chosen by name: what the parser or the class refuses, before any file is written.
RECIPE = [
    (["--model.optimizer=Adamw"], ('"model.optimizer"', "Adamw")),
    (["--model.scheduler=Cosine"], ('"model.scheduler"', "Cosine")),
    (["--model.optimizer=Adam", "--model.optimizer.momentum=0.9"], ("torch.optim.Adam", "'momentum'")),
    (["--model.scheduler=OneCycleLR"], ('"model.scheduler"', "max_lr")),
    (["--model.optimizer.lr=-0.01"], "--model.optimizer SGD: Invalid learning rate: -0.01"),
    (
        ["--model.scheduler=torch.optim.lr_scheduler.ReduceLROnPlateau", "--model.scheduler_monitor=val/f1"],
        "--model.scheduler_monitor val/f1 is never logged: ReduceLROnPlateau can watch val/loss, val/acc, ",
    ),
    (
        ["--model.class_weights=[1, 2]"],
        "--model.class_weights has 2 weights, the data has 10 classes: give one per class, or 'balanced'",
    ),
]


@pytest.mark.parametrize(("args", "expected"), RECIPE, ids=[" ".join(args) for args, _ in RECIPE])
def test_a_recipe_class_or_value_it_refuses_is_one_line_and_writes_nothing(args, expected, tmp_path):
    result = run_app("fit", *args, shrink=False, cwd=tmp_path)
    if isinstance(expected, tuple):  # jsonargparse's line: what it must name
        assert all(part in error_line(result) for part in expected), error_line(result)
    else:
        assert error_line(result).startswith(f"error: {expected}")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.*"))


def test_balanced_sampling_of_a_data_set_without_targets_is_one_line(mnist_root, tmp_path, monkeypatch):
    (tmp_path / "subset_data.py").write_text(
        "from torch.utils.data import Subset\n"
        "from torchvision.datasets import MNIST\n\n"
        "from data import VisionDataModule\n\n\n"
        "class SubsetData(VisionDataModule):  # its data set: a Subset, which has no `targets`\n"
        "    num_classes, in_channels, image_size, mean, std = 10, 1, 28, (0.5,), (0.5,)\n\n"
        "    def load(self, train):\n"
        "        return Subset(MNIST(self.root, train=train), range(400))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["--data=subset_data.SubsetData", f"--data.root={mnist_root}", "--data.sampler=balanced"]
    assert error_line(run_app("fit", *args, cwd=tmp_path)) == (
        "error: --data.sampler balanced reads the training labels from the data set's `targets`, and "
        "SubsetData's (Subset) has none: give it `targets` (a label per sample, as torchvision's data sets "
        "have) or pass --data.sampler shuffle"
    )


EARLY_STOP = '--trainer.callbacks+={"class_path": "EarlyStopping", "init_args": {"monitor": "val/f1"}}'


@pytest.mark.parametrize(
    ("flag", "named"),
    [
        ("--checkpoint.monitor=val/accuracy", "--checkpoint.monitor val/accuracy"),
        (EARLY_STOP, "EarlyStopping val/f1"),
    ],
)
def test_a_monitored_key_the_model_never_logs_is_one_line_before_training(flag, named, mnist_root, tmp_path):
    spy = callback("helpers.stops.SlowSteps", seconds=0, started=str(tmp_path / "spy"))
    line = error_line(run_app("fit", flag, f"--data.root={mnist_root}", spy, cwd=tmp_path))
    assert line == (
        f"error: {named} is never logged; the model logs train/loss, val/loss, val/acc, val/acc_top5, "
        "val/f1_macro, val/precision_macro, val/recall_macro"
    )
    assert not (tmp_path / "spy").exists()  # not one training step ran
    assert not list(tmp_path.glob("runs/*/version_*"))  # and the start left no run folder


@IMAGE_FOLDER
def test_an_option_given_before_the_class_that_takes_it_says_to_swap_them(tmp_path):
    result = run_app(
        "fit", "--data.image_size=32", "--data=ImageFolderDataModule", shrink=False, cwd=tmp_path
    )
    line = error_line(result)
    assert "MNISTDataModule" in line and "'image_size'" in line
    assert line.endswith("; --data ImageFolderDataModule comes after --data.image_size: give it first")


def test_a_corrupt_run_config_names_the_file_and_its_checkpoint(trained_here, tmp_path):
    run = trained_here
    (ckpt,) = (run / "checkpoints").glob("best-*.ckpt")
    (run / "config.yaml").write_text("model:\n  net: [MnistCNN\n")
    files = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    line = error_line(run_app("test", f"--ckpt_path={ckpt}", cwd=tmp_path))
    assert line == (
        f"error: {run / 'config.yaml'}, the run config of --ckpt_path {ckpt}, is not readable YAML at line "
        "3: fix it, or pass the network and data flags yourself with --config FILE"
    )
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == files


def test_a_run_config_naming_a_class_that_is_gone_says_where_it_is(trained_here, tmp_path):
    """A run made before a class was renamed: its config.yaml, read before the flags, is where to fix it."""
    run = trained_here
    (ckpt,) = (run / "checkpoints").glob("best-*.ckpt")
    config = run / "config.yaml"
    good = config.read_text()
    config.write_text(good.replace("app.callbacks.predictions.PredictionsWriter", "app.gone.Writer"))
    files = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    line = error_line(run_app("test", f"--ckpt_path={ckpt}", cwd=tmp_path))
    assert "app.gone.Writer" in line
    assert line.endswith(
        f"; it is in {config}, the run config of --ckpt_path, read before the flags: fix it there, "
        "or pass the network and data flags yourself with --config FILE"
    )
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == files
    # A bad flag beside a good run config is the flag's fault alone.
    config.write_text(good)
    line = error_line(run_app("test", f"--ckpt_path={ckpt}", "--data.batch_size=0", cwd=tmp_path))
    assert "batch_size" in line and "run config" not in line


def test_a_misspelt_command_is_one_line_naming_the_close_one(tmp_path):
    assert error_line(run_app("valdate", shrink=False, cwd=tmp_path)).endswith("; close: validate")


@pytest.mark.part("app.tune")
def test_a_misspelt_program_of_a_part_is_named_too(tmp_path):
    assert error_line(run_app("tun", shrink=False, cwd=tmp_path)).endswith("; close: tune")
    assert "tune" in run_app("--help", shrink=False, cwd=tmp_path).stdout  # listed with the others


def test_the_resident_loader_refuses_a_per_image_transform_it_would_not_run(mnist_root, tmp_path):
    data = "--data=helpers.data_modules.OwnTransform"
    line = error_line(run_app("fit", data, f"--data.root={mnist_root}", cwd=tmp_path))
    assert "OwnTransform overrides train_transform()" in line and "--data.loader torch" in line
    check(run_app("fit", data, f"--data.root={mnist_root}", "--data.loader=torch", cwd=tmp_path))
