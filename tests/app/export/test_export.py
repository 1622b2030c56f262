"""``export``: the checkpoint's model as ONNX or TorchScript, taking uint8 images and giving PyTorch's
probabilities (or, asked for, normalized images in and logits out) at any batch size."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import onnxruntime
import pytest
import torch
from helpers.cli import check, one_error_line, run_app, run_folder
from torchvision.transforms import v2

from app import versions
from app.export.files import ONNX_TORCH
from models import ImageClassifier, ResNet, load

# BatchNorm (must export in eval mode) and NHWC weights: the harder case of our networks.
NET = ["--model.net=ResNet", "--model.net.depth=8", "--model.channels_last=true"]


@pytest.fixture(scope="module")
def trained(mnist_root, tmp_path_factory) -> tuple[Path, Path]:
    """The folder of a tiny fit run and its last checkpoint."""
    cwd = tmp_path_factory.mktemp("export")
    check(run_app("fit", *NET, f"--data.root={mnist_root}", "--test_after_fit=false", cwd=cwd))
    return cwd, run_folder(cwd) / "checkpoints" / "last.ckpt"


def pytorch_logits(ckpt: Path, images: torch.Tensor) -> torch.Tensor:
    model = ImageClassifier(ResNet(in_channels=1, num_classes=10, image_size=28, depth=8), channels_last=True)
    model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"])
    with torch.no_grad():
        return model.eval()(images)


def pytorch_probabilities(ckpt: Path, images: torch.Tensor) -> torch.Tensor:
    """What ``models.load`` gives for uint8 images: its ``preprocess``, the network, a softmax."""
    model = load(ckpt, device="cpu")
    with torch.no_grad():
        return model(model.preprocess(images)).softmax(dim=1)


def photos() -> torch.Tensor:
    """scikit-image's grey photos as a camera at the training size gives them: uint8 (5, 1, 28, 28)."""
    data = pytest.importorskip("skimage.data")
    shots = [data.camera(), data.coins(), data.moon(), data.page(), data.text()]
    squares = [v2.functional.resize(torch.from_numpy(shot)[None], 28, antialias=True) for shot in shots]
    return torch.stack([v2.functional.center_crop(square, 28) for square in squares])


needs_onnx_torch = pytest.mark.skipif(
    versions.needs("torch", ONNX_TORCH) is not None, reason="this torch's ONNX exporter fails on BatchNorm"
)


@needs_onnx_torch
def test_onnx_file_takes_uint8_photos_and_gives_pytorchs_probabilities(trained):
    cwd, ckpt = trained
    check(run_app("export", f"--ckpt_path={ckpt}", cwd=cwd))
    path = ckpt.parent.parent / "model.onnx"
    assert sorted(p.name for p in path.parent.glob("model*.onnx*")) == ["model.onnx"]  # weights inside
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (given,), (output,) = session.get_inputs(), session.get_outputs()
    assert (given.name, given.type, given.shape[1:]) == ("images", "tensor(uint8)", [1, 28, 28])
    assert output.name == "probabilities"
    images = photos()  # 5 images; exported with 2
    (probabilities,) = session.run(None, {"images": images.numpy()})
    expected = pytorch_probabilities(ckpt, images)
    torch.testing.assert_close(torch.from_numpy(probabilities), expected, atol=1e-4, rtol=0)
    metadata = {k: json.loads(v) for k, v in session.get_modelmeta().custom_metadata_map.items()}
    assert metadata["class_names"][:2] == ["0 - zero", "1 - one"] and metadata["input_dtype"] == "uint8"
    assert (metadata["mean"], metadata["std"], metadata["output"]) == ([0.1307], [0.3081], "probabilities")


@needs_onnx_torch
def test_onnx_file_of_the_network_alone_takes_normalized_floats_and_gives_logits(trained, tmp_path):
    cwd, ckpt = trained
    path = tmp_path / "network.onnx"
    check(run_app("export", f"--ckpt_path={ckpt}", "--input_dtype=float32", f"--output={path}", cwd=cwd))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    images = torch.randn(5, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    (logits,) = session.run(["logits"], {"images": images.numpy()})
    torch.testing.assert_close(torch.from_numpy(logits), pytorch_logits(ckpt, images), atol=1e-4, rtol=0)
    metadata = session.get_modelmeta().custom_metadata_map
    assert json.loads(metadata["input_dtype"]) == "float32" and json.loads(metadata["output"]) == "logits"


def test_onnx_on_a_torch_older_than_its_exporter_needs_is_one_line(trained, tmp_path, monkeypatch):
    """The check reads the release through ``app.versions.installed``, pointed here at an older one."""
    real = versions.installed
    monkeypatch.setattr(versions, "installed", lambda p: (2, 6, 0) if p == "torch" else real(p))
    cwd, ckpt = trained
    output = tmp_path / "model.onnx"
    result = run_app("export", f"--ckpt_path={ckpt}", f"--output={output}", cwd=cwd)
    assert result.returncode != 0 and not output.exists()
    assert one_error_line(result.stderr) == (
        "error: export --format onnx needs torch >= 2.7 (torch 2.6.0 here): upgrade torch, or --format "
        "torchscript"
    )


# A fresh interpreter in which the project cannot be imported: the file alone, with torch.
FRESH = """
import json, sys
for name in ("app", "data", "models"):
    sys.modules[name] = None  # importing it fails
import torch
extra = {"data.json": ""}
module = torch.jit.load(sys.argv[1], _extra_files=extra)
with torch.no_grad():
    torch.save(module(torch.load(sys.argv[2])), sys.argv[3])
print(json.dumps(json.loads(extra["data.json"])["class_names"]))
"""


def test_torchscript_file_runs_without_the_project_and_gives_pytorchs_probabilities(trained, tmp_path):
    cwd, ckpt = trained
    # In the run folder by default; a second export there keeps the first file (whatever the format).
    path = ckpt.parent.parent / "model.pt"
    check(run_app("export", f"--ckpt_path={ckpt}", "--format=torchscript", cwd=cwd))
    first = path.read_bytes()
    check(run_app("export", f"--ckpt_path={ckpt}", "--format=torchscript", cwd=cwd))
    assert sorted(p.name for p in path.parent.glob("model*.pt")) == ["model-2.pt", "model.pt"]
    assert path.read_bytes() == first
    output = tmp_path / "serving" / "classifier.pt"
    check(run_app("export", f"--ckpt_path={ckpt}", "--format=torchscript", f"--output={output}", cwd=cwd))
    images = photos()[:3]
    torch.save(images, tmp_path / "images.pt")
    command = [
        sys.executable,
        "-I",
        "-W",
        "ignore",
        "-c",
        FRESH,
        output,
        tmp_path / "images.pt",
        tmp_path / "out.pt",
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)[9] == "9 - nine"
    probabilities = torch.load(tmp_path / "out.pt")
    torch.testing.assert_close(probabilities, pytorch_probabilities(ckpt, images), atol=1e-4, rtol=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.load` is deprecated")
        module = torch.jit.load(output)
    for batch in (1, 7):  # any batch size
        images = torch.randint(0, 256, (batch, 1, 28, 28), generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            probabilities = module(images.to(torch.uint8))
        expected = pytorch_probabilities(ckpt, images.to(torch.uint8))
        torch.testing.assert_close(probabilities, expected, atol=1e-4, rtol=0)
