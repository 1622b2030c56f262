"""The model's side of ``POST /predict``: LitServe's ``LitAPI``, in each inference worker process."""

import signal
from pathlib import Path
from typing import Annotated, Any, Literal

import litserve
import numpy as np
import torch
from fastapi import Body
from torch import Tensor
from torchvision.transforms import v2

import models
from app.errors import UsageError

Backend = Literal["torch", "onnxruntime"]

# What reaches decode_request: the upload as UploadGate decoded and cropped it, uint8 (C, S, S) bytes.
Crop = Annotated[bytes, Body(media_type="application/octet-stream")]


class ImageAPI(litserve.LitAPI):
    """A checkpoint's classifier: a batch of uint8 crops in, each one's ``top_k`` classes out.

    Args:
        ckpt_path: the checkpoint; its network runs in torch, or ``onnx_path`` in onnxruntime.
        card: the checkpoint's data card (channels, size, mean, std, class names).
        top_k: classes in each answer, most likely first.
        backend: ``torch`` or ``onnxruntime``.
        onnx_path: the checkpoint exported to ONNX (uint8 images in, probabilities out), for onnxruntime.
        max_batch_size: requests predicted together at most (LitServe's dynamic batching).
        batch_timeout: seconds a batch waits to fill up.
    """

    def __init__(
        self,
        ckpt_path: str,
        card: dict[str, Any],
        top_k: int,
        backend: Backend = "torch",
        onnx_path: str | None = None,
        max_batch_size: int = 1,
        batch_timeout: float = 0.0,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, batch_timeout=batch_timeout)
        self.ckpt_path, self.card, self.top_k = ckpt_path, card, top_k
        self.backend, self.onnx_path = backend, onnx_path
        self.shape = (card["in_channels"], card["image_size"], card["image_size"])
        self.names = card.get("class_names") or [str(k) for k in range(card["num_classes"])]

    def setup(self, device: str) -> None:
        # The serve process ends this worker once the HTTP processes have answered what they accepted: a
        # Ctrl-C, sent to every process of the terminal, must not end it before.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.device = torch.device(device)
        if self.backend == "onnxruntime":
            import onnxruntime

            cuda = (
                self.device.type == "cuda"
                and "CUDAExecutionProvider" in onnxruntime.get_available_providers()
            )
            providers = ["CUDAExecutionProvider"] if cuda else ["CPUExecutionProvider"]
            self.session = onnxruntime.InferenceSession(self.onnx_path, providers=providers)
            return
        self.model = models.load(self.ckpt_path, self.device)

    def decode_request(self, request: Crop) -> Tensor:
        return torch.frombuffer(bytearray(request), dtype=torch.uint8).view(self.shape)

    @torch.inference_mode()
    def predict(self, images: Tensor) -> Tensor:
        """uint8 (N, C, S, S) to class probabilities (N, classes) on the CPU; one image (C, S, S), as
        LitServe passes it without batching, to its probabilities (classes,)."""
        batch = images if images.ndim == 4 else images[None]
        if self.backend == "onnxruntime":
            (probabilities,) = self.session.run(None, {"images": np.ascontiguousarray(batch.numpy())})
            probabilities = torch.from_numpy(probabilities)
        else:
            # The last steps of data.predict_files.eval_transform, on the batch.
            batch = v2.functional.to_dtype(batch.to(self.device), torch.float32, scale=True)
            batch = v2.functional.normalize(batch, self.card["mean"], self.card["std"])
            probabilities = self.model(batch).softmax(dim=1).cpu()
        return probabilities if images.ndim == 4 else probabilities[0]

    def encode_response(self, output: Tensor) -> dict[str, list[dict[str, Any]]]:
        top = output.topk(min(self.top_k, len(output)))
        return {
            "predictions": [
                {"class": k, "class_name": self.names[k], "probability": p}
                for k, p in zip(top.indices.tolist(), top.values.tolist(), strict=True)
            ]
        }


def onnx_export(ckpt_path: str, folder: Path) -> str:
    """The checkpoint's network as ONNX in ``folder`` (uint8 images in, probabilities out), written as
    ``python -m app export`` writes it."""
    try:
        from app.export.files import card, check_exporter, input_sample, write  # an optional part
    except ImportError as err:
        raise UsageError(
            "--serve.backend onnxruntime needs app/export/, which this project was made without: "
            "pass --serve.backend torch"
        ) from err
    check_exporter("onnx")
    model = models.load(ckpt_path, "cpu")
    data = model.data_card
    path = folder / "model.onnx"
    write(
        model, input_sample(data["in_channels"], data["image_size"], "uint8"), path, "onnx", card(model, None)
    )
    return str(path)
