"""Optional part: ``python -m app export``, a checkpoint's network as one ONNX or TorchScript file.

To drop it: ``rm -r app/export tests/app/export`` and its line in ``app/trainer.py``.
"""

from pathlib import Path
from typing import Literal

from lightning import LightningDataModule, LightningModule, Trainer

from app.export.files import card, check_exporter, default_output, input_sample, write
from app.runs import folder
from app.runs.folder import run_folder
from data.contract import provided


def export(
    trainer: Trainer,
    model: LightningModule,
    datamodule: LightningDataModule | None = None,
    ckpt_path: str | None = None,
    format: Literal["onnx", "torchscript"] = "onnx",
    output: str | None = None,
    weights_only: bool | None = None,
    input_dtype: Literal["uint8", "float32"] = "uint8",
) -> Path:
    """Write the network with a checkpoint's weights as an ONNX or TorchScript file.

    By default the file takes images as a camera gives them, uint8 (batch, channels, size, size) at
    the training size, any batch size, normalizes them inside and returns probabilities (batch,
    classes); ``--input_dtype float32`` keeps the network alone: normalized float32 images in, logits
    out. In ONNX the input is named ``images`` and the output ``probabilities`` or ``logits``. What the
    checkpoint knows of its data (class names, input shape, mean and std) and the ``input_dtype`` go in
    as JSON values: ONNX ``metadata_props``, TorchScript extra file ``data.json``.

    Args:
        trainer: the Trainer (this is its ``export`` method).
        model: the classifier, built from the run's config.
        datamodule: gives the images' channels and size.
        ckpt_path: the checkpoint whose weights are exported; None exports the model as built.
        format: ``onnx`` (needs onnx and onnxscript: ``pip install ".[export]"``) or ``torchscript``.
        output: the file to write; default ``model.onnx`` or ``model.pt`` in the run folder
            (``model-2.onnx``, ... where an earlier export wrote those).
        weights_only: load the checkpoint with torch's weights-only unpickler (None: Lightning's
            choice).
        input_dtype: ``uint8`` (raw images in, probabilities out) or ``float32`` (normalized images in,
            logits out).

    Returns:
        The path written.
    """
    check_exporter(format)
    default = default_output(run_folder(trainer), format)
    path = Path(output) if output else folder.unused(default)
    if ckpt_path is not None:
        checkpoint = trainer.strategy.load_checkpoint(ckpt_path, weights_only=weights_only)
        model.load_state_dict(checkpoint["state_dict"])
        model.on_load_checkpoint(checkpoint)  # its data card: class names, normalization
    sample = input_sample(
        provided(datamodule, "in_channels"), provided(datamodule, "image_size"), input_dtype
    )
    if trainer.is_global_zero:
        write(model, sample, path, format, card(model, datamodule))
    return path
