"""``export``: the checkpoint's model as ONNX or TorchScript, giving PyTorch's logits at any batch size."""

import warnings
from pathlib import Path

import onnxruntime
import pytest
import torch
from helpers.cli import check, one_error_line, run_app, run_folder

from app import versions
from app.export.files import ONNX_TORCH
from models import ImageClassifier, ResNet

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


@pytest.mark.skipif(
    versions.needs("torch", ONNX_TORCH) is not None, reason="this torch's ONNX exporter fails on BatchNorm"
)
def test_onnx_file_next_to_the_checkpoints_matches_pytorch(trained):
    cwd, ckpt = trained
    check(run_app("export", f"--ckpt_path={ckpt}", cwd=cwd))
    path = ckpt.parent.parent / "model.onnx"
    assert sorted(p.name for p in path.parent.glob("model*")) == ["model.onnx"]  # weights inside
    first = path.read_bytes()
    check(run_app("export", f"--ckpt_path={ckpt}", cwd=cwd))  # a second export keeps the first file
    assert sorted(p.name for p in path.parent.glob("model*")) == ["model-2.onnx", "model.onnx"]
    assert path.read_bytes() == first
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    images = torch.randn(5, 1, 28, 28, generator=torch.Generator().manual_seed(0))  # exported with 2
    (logits,) = session.run(["logits"], {"images": images.numpy()})
    torch.testing.assert_close(torch.from_numpy(logits), pytorch_logits(ckpt, images), atol=1e-4, rtol=0)


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


def test_torchscript_file_matches_pytorch(trained, tmp_path):
    cwd, ckpt = trained
    output = tmp_path / "serving" / "classifier.pt"
    check(run_app("export", f"--ckpt_path={ckpt}", "--format=torchscript", f"--output={output}", cwd=cwd))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.load` is deprecated")
        module = torch.jit.load(output)
    for batch in (1, 7):
        images = torch.randn(batch, 1, 28, 28, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            logits = module(images)
        torch.testing.assert_close(logits, pytorch_logits(ckpt, images), atol=1e-4, rtol=0)
