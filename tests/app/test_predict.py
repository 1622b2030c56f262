"""``predict`` writes RUN/predictions.csv: every sample once, in order, as the checkpoint classifies it."""

import csv
import shutil
from pathlib import Path

import pytest
import torch
from helpers.cli import check, run_app, run_folder, run_process
from helpers.image_files import check_rows, predict_image_answers, write_image_files
from torchvision.datasets import MNIST, FashionMNIST

import data
from data import (
    CIFAR10DataModule,
    FashionMNISTDataModule,
    MNISTDataModule,
    VisionDataModule,
)
from models import ImageClassifier, MnistCNN

# None where the optional image-folder part was dropped; its tests then skip (image_folder_root).
ImageFolderDataModule = getattr(data, "ImageFolderDataModule", None)

DDP2 = ["--trainer.strategy=ddp", "--trainer.accelerator=cpu", "--trainer.devices=2"]
BATCH = "--data.batch_size=32"  # several batches, and shards of unequal length under ddp


def fitted(cwd: Path, *args: str) -> Path:
    """The last checkpoint of a tiny fit run in ``cwd``."""
    check(run_app("fit", *args, "--model.optimizer.lr=0.05", "--test_after_fit=false", cwd=cwd))
    return run_folder(cwd) / "checkpoints" / "last.ckpt"


def predict(ckpt: Path, *args: str) -> list[dict[str, str]]:
    """Run ``predict`` on ``ckpt`` and read the predictions.csv it wrote in its run folder."""
    (ckpt.parent.parent / "predictions.csv").unlink(missing_ok=True)
    return predict_into(ckpt, "predictions.csv", *args)


def predict_into(ckpt: Path, name: str, *args: str) -> list[dict[str, str]]:
    """Run ``predict`` on ``ckpt`` and read the file ``name`` it must have written in its run folder."""
    run = ckpt.parent.parent
    run_cli = run_process if "--trainer.strategy=ddp" in args else run_app
    result = run_cli("predict", f"--ckpt_path={ckpt}", BATCH, *args, cwd=run.parent.parent.parent)
    check(result)
    with open(run / name, newline="") as f:
        rows = list(csv.DictReader(f))
    # The last line says where the file is.
    assert result.stderr.rstrip().endswith(f"done: {len(rows)} predictions in {run / name}")
    return rows


def probabilities(ckpt: Path, data: VisionDataModule) -> torch.Tensor:
    """The checkpoint's model's class probabilities for every predict sample of ``data``, computed here."""
    model = ImageClassifier(MnistCNN(data.in_channels, data.num_classes, data.image_size), data.num_classes)
    model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"])
    data.setup("predict")
    data.predict_dataloader()  # lists predict_dir's files, if any
    images = torch.stack([data.predict_set[i][0] for i in range(len(data.predict_set))])
    # As Lightning runs it: a photo folder's uint8 batches are normalized there.
    images, _ = data.on_after_batch_transfer((images, None), 0)
    with torch.no_grad():
        return model.eval()(images).softmax(dim=1)


def check_against_model(
    rows: list[dict[str, str]], expected: torch.Tensor, names: list[str], decided: int = 10
) -> None:
    """Rows match the probabilities ``expected`` of the model, row i being sample i.

    The class must be the argmax at least where that is clear, in at least ``decided`` rows.
    """
    assert len(rows) == len(expected)
    top2 = expected.topk(2, dim=1).values
    clear = 0
    for row, p, (first, second) in zip(rows, expected, top2.tolist(), strict=True):
        assert names[int(row["class"])] == row["class_name"]
        assert 0 < float(row["probability"]) <= 1
        assert float(row["probability"]) == pytest.approx(first, abs=2e-6)
        if first - second > 1e-4:  # else float noise may pick either of two near-equal classes
            assert int(row["class"]) == int(p.argmax())
            clear += 1
    assert clear >= decided


@pytest.fixture(scope="module")
def mnist_ckpt(mnist_root, tmp_path_factory) -> Path:
    return fitted(tmp_path_factory.mktemp("predict_mnist"), f"--data.root={mnist_root}")


@pytest.fixture(scope="module")
def one_process(mnist_ckpt) -> list[dict[str, str]]:
    return predict(mnist_ckpt)


def test_predicts_the_test_split_of_mnist_in_order(one_process, mnist_ckpt, mnist_root):
    assert list(one_process[0]) == ["index", "class", "class_name", "probability"]
    assert [int(row["index"]) for row in one_process] == list(range(251))  # each test image once, in order
    expected = probabilities(mnist_ckpt, MNISTDataModule(str(mnist_root), download=False))
    check_against_model(one_process, expected, MNIST.classes)


@pytest.mark.full
@pytest.mark.distributed
def test_two_ddp_processes_write_one_file_equal_to_one_process(one_process, mnist_ckpt):
    """251 test images, batch 32: shards of 126 and 125; rank 0 merges them back into one file."""
    two = predict(mnist_ckpt, *DDP2)
    assert [row["index"] for row in two] == [row["index"] for row in one_process]
    for row, single in zip(two, one_process, strict=True):
        assert (row["class"], row["class_name"]) == (single["class"], single["class_name"])
        assert float(row["probability"]) == pytest.approx(float(single["probability"]), abs=2e-6)


def test_predict_dir_classifies_any_file_for_an_mnist_checkpoint_as_predict_image(mnist_ckpt, tmp_path):
    """Files of any size and mode get the checkpoint's preprocessing; the data set itself is not read."""
    files = write_image_files(tmp_path / "mine")
    rows = predict(mnist_ckpt, f"--data.predict_dir={tmp_path / 'mine'}", f"--data.root={tmp_path / 'gone'}")
    assert list(rows[0]) == ["file", "class", "class_name", "probability"]
    check_rows(rows, predict_image_answers(mnist_ckpt, files))
    assert not (tmp_path / "gone").exists()  # nothing downloaded, nothing unpacked


@pytest.mark.full
@pytest.mark.parametrize(
    ("data", "root", "options"),
    [
        ("FashionMNISTDataModule", "fashion_mnist_root", []),
        ("CIFAR10DataModule", "cifar10_root", ["--data.verify=false"]),
    ],
)
def test_predict_dir_classifies_any_file_as_predict_image(data, root, options, request, tmp_path):
    ckpt = fitted(tmp_path, f"--data={data}", f"--data.root={request.getfixturevalue(root)}", *options)
    files = write_image_files(tmp_path / "mine")
    check_rows(predict(ckpt, f"--data.predict_dir={tmp_path / 'mine'}"), predict_image_answers(ckpt, files))


@pytest.fixture(scope="module")
def folder_ckpt(image_folder_root, tmp_path_factory) -> Path:
    cwd = tmp_path_factory.mktemp("predict_folder")
    # 29 training images: the batch must not be larger.
    data = ["--data=ImageFolderDataModule", f"--data.root={image_folder_root}", "--data.batch_size=16"]
    return fitted(cwd, *data)


def test_predicts_a_folder_of_unlabelled_images(folder_ckpt, image_folder_root, tmp_path):
    # Flat files, a nested folder, and a file that is not an image.
    (tmp_path / "nested" / "deeper").mkdir(parents=True)
    sources = sorted((image_folder_root / "test").glob("*/*.png"))[::3]
    targets = ["b.png", "a.png", "nested/c.png", "nested/deeper/d.png", "nested/deeper/e.png", "f.png"]
    targets += [f"nested/{i}.png" for i in range(len(sources) - len(targets))]
    for source, target in zip(sources, targets, strict=True):
        shutil.copy(source, tmp_path / target)
    (tmp_path / "notes.txt").write_text("not an image")

    rows = predict(folder_ckpt, f"--data.predict_dir={tmp_path}")
    assert list(rows[0]) == ["file", "class", "class_name", "probability"]
    assert [row["file"] for row in rows] == sorted(targets, key=lambda t: Path(t).parts)
    data = ImageFolderDataModule(str(image_folder_root), predict_dir=str(tmp_path))
    assert data.class_names == ["class_0", "class_1", "class_2"]
    check_against_model(rows, probabilities(folder_ckpt, data), data.class_names, decided=6)


@pytest.mark.full
def test_predict_dir_classifies_any_file_for_an_image_folder_checkpoint_as_predict_image(
    folder_ckpt, tmp_path
):
    files = write_image_files(tmp_path / "mine")
    check_rows(
        predict(folder_ckpt, f"--data.predict_dir={tmp_path / 'mine'}"),
        predict_image_answers(folder_ckpt, files),
    )


def test_a_second_predict_writes_a_second_file(folder_ckpt, image_folder_root, tmp_path):
    run = folder_ckpt.parent.parent
    (run / "predictions.csv").write_text("an earlier predict's file\n")
    rows = predict_into(folder_ckpt, "predictions-2.csv", f"--data.predict_dir={image_folder_root / 'test'}")
    assert len(rows) == len(list((image_folder_root / "test").glob("*/*.png")))
    assert (run / "predictions.csv").read_text() == "an earlier predict's file\n"
    (run / "predictions.csv").unlink()


def test_a_predict_dir_without_images_is_one_line(folder_ckpt, tmp_path):
    result = run_app("predict", f"--ckpt_path={folder_ckpt}", f"--data.predict_dir={tmp_path}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: no images (.jpg, .jpeg, .png")


@pytest.mark.parametrize(
    ("module", "root", "options", "names"),
    [
        (MNISTDataModule, "mnist_root", {}, MNIST.classes),
        (FashionMNISTDataModule, "fashion_mnist_root", {}, FashionMNIST.classes),
        (CIFAR10DataModule, "cifar10_root", {"verify": False}, [f"class{i}" for i in range(10)]),  # its meta
        (ImageFolderDataModule, "image_folder_root", {}, ["class_0", "class_1", "class_2"]),
    ],
)
def test_every_datamodule_names_its_classes(module, root, options, names, request):
    data = module(str(request.getfixturevalue(root)), **options)
    data.setup("predict")
    assert data.class_names == names
    assert isinstance(data.predict_dataloader(), torch.utils.data.DataLoader)  # for Lightning's indices
