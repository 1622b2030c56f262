"""The exported file: ONNX or TorchScript, with the data card inside."""

import importlib.util
import json
import warnings
from pathlib import Path

import torch
from lightning import LightningModule
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn

from app import versions
from app.errors import UsageError
from data.contract import card as data_card

SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt"}
DATA_FILE = "data.json"  # in a TorchScript file: the data card
ONNX_TORCH = (2, 7)  # torch 2.6's ONNX exporter fails on BatchNorm with the onnxscript the extra asks for


def add_onnx_metadata(path: Path, card: dict) -> None:
    """Store each entry of ``card`` (class names, input shape, mean, std) as JSON in the model's metadata."""
    import onnx

    proto = onnx.load(str(path))
    for key, value in card.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, json.dumps(value)
    onnx.save(proto, str(path))


def check_exporter(format: str) -> None:
    """One line naming the torch or the packages ``format`` needs, if they are missing."""
    if format == "onnx":
        needed = versions.needs("torch", ONNX_TORCH)
        if needed:
            raise UsageError(f"export --format onnx needs {needed}: upgrade torch, or --format torchscript")
        missing = [m for m in ("onnx", "onnxscript") if importlib.util.find_spec(m) is None]
        if missing:
            raise UsageError(f"export --format onnx needs {' and '.join(missing)}: pip install '.[export]'")


def card(model: LightningModule, datamodule: object) -> dict:
    """What the file says of its data: the checkpoint's data card (else the DataModule's), with the input."""
    found = getattr(model, "data_card", None) or data_card(datamodule)
    return {**found, "input_dtype": "uint8", "output": "probabilities"}


def write(model: LightningModule, sample: Tensor, path: Path, format: str, card: dict) -> None:
    """Write ``model.net`` for inputs shaped like ``sample`` (any batch size) to ``path``: uint8 images in,
    probabilities out, or, for a float sample, normalized images in, logits out."""
    path.parent.mkdir(parents=True, exist_ok=True)
    model = model.cpu().eval()
    if sample.dtype == torch.uint8:
        if "mean" not in card or "std" not in card:
            raise UsageError(
                "export of uint8 images needs the data's mean and std, which neither the checkpoint nor the "
                "DataModule gives: pass --input_dtype float32 (normalized images in, logits out)"
            )
        graph, output = CameraNetwork(model.net, card["mean"], card["std"]), "probabilities"
    else:
        graph, output, card = (
            Network(model.net),
            "logits",
            {**card, "input_dtype": "float32", "output": "logits"},
        )
    graph.eval()  # the wrapper too: torch's exporter warns of a module left in training mode
    if format == "onnx":
        torch.onnx.export(
            graph,
            (sample,),
            path,
            dynamo=True,
            verbose=False,
            input_names=["images"],
            output_names=[output],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
            external_data=False,  # one file; the 2 GB limit of that is far above these CNNs
        )
        add_onnx_metadata(path, card)
    else:
        # torch deprecates TorchScript (and Lightning its to_torchscript); the user asked for it.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"`torch\.jit\.\w+` is deprecated")
            traced = torch.jit.trace(graph, sample)
            torch.jit.save(traced, path, _extra_files={DATA_FILE: json.dumps(card)})
    shape = f"{sample.dtype}".removeprefix("torch.") + f" {tuple(sample.shape[1:])}"
    rank_zero_info(f"exported {path} ({format}, input {shape} with any batch size, output {output})")


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


class CameraNetwork(Network):
    """uint8 images in, probabilities out: the data's scaling and normalization, the network, a softmax."""

    def __init__(self, net: nn.Module, mean: list[float], std: list[float]) -> None:
        super().__init__(net)
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, images: Tensor) -> Tensor:
        normalized = (images.float() / 255 - self.mean) / self.std  # as ToDtype(scale=True), then Normalize
        return super().forward(normalized).softmax(dim=1)


def default_output(run: Path, format: str) -> Path:
    """``model.onnx`` or ``model.pt`` in the run folder."""
    return run / f"model{SUFFIXES[format]}"


def input_sample(channels: int | None, size: int | None, dtype: str = "float32") -> Tensor:
    """A batch of 2 random images of the data set's shape (a batch of 1 would fix the batch size)."""
    if channels is None or size is None:
        raise UsageError("export needs a DataModule with in_channels and image_size to shape its input")
    if dtype == "uint8":
        return torch.randint(0, 256, (2, channels, size, size), dtype=torch.uint8)
    return torch.randn(2, channels, size, size)
