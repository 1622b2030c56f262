"""``python -m app export``: a checkpoint's model as one ONNX or TorchScript file, to serve anywhere."""

import importlib.util
import warnings
from pathlib import Path
from typing import Literal

import lightning
import torch
from lightning import LightningDataModule, LightningModule
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn

from app.errors import UsageError

SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt"}


class ExportTrainer(lightning.Trainer):
    """Lightning's Trainer, plus ``export``: the model as an ONNX or TorchScript file."""

    def export(
        self,
        model: LightningModule,
        datamodule: LightningDataModule | None = None,
        ckpt_path: str | None = None,
        format: Literal["onnx", "torchscript"] = "onnx",
        output: str | None = None,
        weights_only: bool | None = None,
    ) -> Path:
        """Write the model with a checkpoint's weights as an ONNX or TorchScript file.

        The file maps normalized images (batch, channels, size, size), float32, any batch size,
        to logits (batch, classes). Inputs are named ``images`` and outputs ``logits`` in ONNX.

        Args:
            model: the classifier, built from the run's config.
            datamodule: gives the images' channels and size.
            ckpt_path: the checkpoint whose weights are exported; None exports the model as built.
            format: ``onnx`` (needs onnx and onnxscript: ``pip install ".[export]"``) or ``torchscript``.
            output: the file to write; default ``model.onnx`` or ``model.pt`` in the checkpoint's run
                folder (the folder above ``checkpoints/``).
            weights_only: load the checkpoint with torch's weights-only unpickler, as ``predict`` does
                (None: Lightning's choice). Here also so that a run's ``config.yaml`` applies.

        Returns:
            The path written.
        """
        if format == "onnx":
            missing = [m for m in ("onnx", "onnxscript") if importlib.util.find_spec(m) is None]
            if missing:
                raise UsageError(
                    f"export --format onnx needs {' and '.join(missing)}: pip install '.[export]'"
                )
        path = Path(output) if output else default_output(ckpt_path, self.default_root_dir, format)
        if ckpt_path is not None:
            checkpoint = self.strategy.load_checkpoint(ckpt_path, weights_only=weights_only)
            model.load_state_dict(checkpoint["state_dict"])
        sample = input_sample(datamodule)
        model = model.cpu().eval()
        if self.is_global_zero:
            path.parent.mkdir(parents=True, exist_ok=True)
            if format == "onnx":
                model.to_onnx(
                    path,
                    sample,
                    dynamo=True,
                    verbose=False,
                    input_names=["images"],
                    output_names=["logits"],
                    dynamic_shapes=({0: torch.export.Dim("batch")},),
                    external_data=False,  # one file; the 2 GB limit of that is far above these CNNs
                )
            else:
                # torch deprecates TorchScript (and Lightning its to_torchscript); the user asked for it.
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message=r"`torch\.jit\.\w+` is deprecated")
                    torch.jit.save(torch.jit.trace(Network(model.net), sample), path)
            rank_zero_info(f"exported {path} ({format}, input {tuple(sample.shape[1:])} with any batch size)")
        return path


class Network(nn.Module):
    """The classifier's network alone, for tracing, called through its plain ``forward``.

    Tracing the LightningModule would read its ``trainer`` (there is none), and tracing cannot go
    through the ``__call__`` of a network compiled in place (``--model.compile true``).
    """

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, images: Tensor) -> Tensor:
        return self.net.forward(images)


def default_output(ckpt_path: str | None, root: str, format: str) -> Path:
    """``model.onnx`` or ``model.pt`` in the checkpoint's run folder, else in ``root``."""
    if ckpt_path is None:
        folder = Path(root)
    else:
        folder = Path(ckpt_path).parent
        folder = folder.parent if folder.name == "checkpoints" else folder
    return folder / f"model{SUFFIXES[format]}"


def input_sample(datamodule: LightningDataModule | None) -> Tensor:
    """A batch of 2 random images of the data set's shape (a batch of 1 would fix the batch size)."""
    channels = getattr(datamodule, "in_channels", None)
    size = getattr(datamodule, "image_size", None)
    if channels is None or size is None:
        raise UsageError("export needs a DataModule with in_channels and image_size to shape its input")
    return torch.randn(2, channels, size, size)
