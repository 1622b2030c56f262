"""A fit's checkpoint in plain Python: ``load_from_checkpoint`` and ``models.load`` from the file alone."""

import shutil
import subprocess
import sys

import pytest
import torch
from helpers.cli import ROOT, app_env, run_folder
from PIL import Image

from data import MNISTDataModule
from models import ImageClassifier, MnistCNN, ModelError, load


@pytest.fixture(scope="module")
def best(trained_run):
    return next((run_folder(trained_run) / "checkpoints").glob("best-*.ckpt"))


@pytest.fixture(scope="module")
def mnist_test(mnist_root) -> MNISTDataModule:
    data = MNISTDataModule(root=str(mnist_root), download=False, num_workers=0)
    data.setup("test")
    return data


def test_load_from_checkpoint_alone_brings_back_network_recipe_and_data_card(best):
    saved = torch.load(best, map_location="cpu", weights_only=True)  # plain data: no pickled objects
    model = ImageClassifier.load_from_checkpoint(best)
    assert isinstance(model.net, MnistCNN)
    state = model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in saved["state_dict"].items())
    assert model.hparams.net == saved["hyper_parameters"]["net"]  # kept for the checkpoints it writes
    assert model.optimizer.func is torch.optim.SGD and model.optimizer.keywords["lr"] == 0.01
    assert model.scheduler.func.__name__ == "WarmupCosineLR"
    assert model.data_card["class_names"][3] == "3 - three"
    assert (model.data_card["in_channels"], model.data_card["image_size"]) == (1, 28)


def test_load_gives_the_model_in_eval_mode_with_its_data_pipeline(best, mnist_test):
    model = load(best, device="cpu")
    assert not model.training and model.device.type == "cpu"
    image, _ = mnist_test.test_set[7]  # through the DataModule's evaluation transform
    raw = mnist_test.test_set.dataset.data[7]  # the uint8 image of the IDX file
    assert torch.equal(model.preprocess(raw[None]), image[None])
    assert torch.equal(model.preprocess(Image.fromarray(raw.numpy())), image[None])
    predicted = model.predict_image(raw[None])
    with torch.no_grad():
        expected = model(image[None]).softmax(dim=1)[0]
    names = model.data_card["class_names"]
    assert [name for name, _ in predicted] == [names[k] for k in expected.argsort(descending=True).tolist()]
    assert [p for _, p in predicted] == pytest.approx(sorted(expected.tolist(), reverse=True), abs=1e-6)
    # Another size and colour, as a camera gives it: resized, centre-cropped and made grey.
    photo = Image.fromarray(torch.randint(0, 256, (60, 45, 3), dtype=torch.uint8).numpy())
    assert model.preprocess(photo).shape == (1, 1, 28, 28)
    assert len(model.predict_image(photo, top=3)) == 3


def test_a_checkpoint_from_before_it_held_its_network_loads_with_its_runs_config(trained_here, tmp_path):
    """Such a checkpoint's hyperparameters lack the network, optimizer and schedule."""
    best = next((trained_here / "checkpoints").glob("best-*.ckpt"))
    checkpoint = torch.load(best, map_location="cpu", weights_only=True)
    for key in ("net", "optimizer", "scheduler"):
        del checkpoint["hyper_parameters"][key]
    old = trained_here / "checkpoints" / "old.ckpt"
    torch.save(checkpoint, old)
    model, new = load(old), load(best)
    images = torch.rand(3, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(model(images), new(images), atol=0, rtol=0)
    assert model.scheduler.func.__name__ == "WarmupCosineLR"
    moved = tmp_path / "old.ckpt"
    shutil.move(old, moved)  # away from its run's config.yaml
    with pytest.raises(ModelError) as error:
        load(moved)
    assert str(error.value).startswith(f"{moved} was written before checkpoints held their network's config")
    assert "\n" not in str(error.value)


def test_a_model_built_in_python_keeps_no_objects_in_its_hyperparameters():
    model = ImageClassifier(MnistCNN(), optimizer=lambda params: torch.optim.SGD(params, lr=0.1))
    assert "net" not in model.hparams and "optimizer" not in model.hparams
    with pytest.raises(ModelError, match="does not know its data's in_channels"):
        model.preprocess(torch.zeros(1, 28, 28, dtype=torch.uint8))


@pytest.mark.full  # a fresh interpreter, as a user runs the file: its imports take most of 10 s
def test_the_docs_example_runs_as_written(best, mnist_test, tmp_path):
    raw = mnist_test.test_set.dataset.data[7]
    photo = tmp_path / "digit.png"
    Image.fromarray(raw.numpy()).save(photo)
    example = ROOT / "docs" / "examples" / "use_a_checkpoint.py"
    env = {**app_env(), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, example, best, photo], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    expected = load(best, device="cpu").predict_image(raw[None], top=3)
    assert result.stdout.splitlines() == [f"{name}: {p:.3f}" for name, p in expected]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_load_on_the_gpu_gives_the_cpus_answers(best, mnist_test):
    raw = mnist_test.test_set.dataset.data[7]
    on_gpu = load(best)  # the GPU where there is one
    assert on_gpu.device.type == "cuda" and on_gpu.preprocess(raw[None]).device.type == "cuda"
    gpu = dict(on_gpu.predict_image(raw[None]))
    cpu = dict(load(best, device="cpu").predict_image(raw[None]))
    assert gpu.keys() == cpu.keys() and all(abs(gpu[k] - cpu[k]) < 1e-4 for k in cpu)
