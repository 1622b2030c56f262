"""A trained classifier from its checkpoint file alone, for a notebook or a service: ``models.load(path)``."""

import importlib
import inspect
from pathlib import Path

import torch
import yaml

from models.errors import ModelError
from models.image_classifier import ImageClassifier

# What the CLI links from the DataModule into the network's arguments, where its __init__ takes them.
LINKED = ("in_channels", "image_size", "num_classes")


def load(path: str | Path, device: str | torch.device | None = None) -> ImageClassifier:
    """The classifier of checkpoint ``path`` in eval mode on ``device`` (None: the GPU if there is one).

    The network, the recipe and the data card (``model.data_card``: class names, input size,
    normalization) come from the file: ``model.preprocess(image)`` makes a PIL image or uint8 tensor
    its input, ``model.predict_image(image)`` gives class names and probabilities. A checkpoint written
    before checkpoints held their network's config takes it from its run's ``config.yaml``.

    Raises:
        ModelError: no such file, or an old checkpoint whose run's ``config.yaml`` is gone.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such checkpoint file")
    checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    saved = checkpoint.get("hyper_parameters") or {}
    recipe = {"net": saved["net"]} if "net" in saved else recipe_of_run(path, checkpoint.get("data") or {})
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    # The checkpoint's weights replace the initial ones: no pretrained weights or init_from file is read
    # (they may be gone), and nothing is compiled or captured for training.
    net_args = recipe["net"].get("init_args") or {}
    net_args = {k: v for k, v in net_args.items() if not (k == "weights" and isinstance(v, str))}
    recipe["net"] = {**recipe["net"], "init_args": net_args}
    overrides = {"init_from": None, "compile": False, "cuda_graphs": False}
    model = ImageClassifier.load_from_checkpoint(path, map_location=device, **recipe, **overrides)
    return model.eval()


def recipe_of_run(path: Path, card: dict) -> dict:
    """The network, optimizer and schedule of an older checkpoint's run, from the ``config.yaml`` of the run
    folder it is in (``RUN/checkpoints/FILE.ckpt``), with what the CLI linked in from the data."""
    configs = [run / "config.yaml" for run in (path.parent.parent, path.parent)]
    config = next((c for c in configs if c.is_file()), None)
    if config is None:
        raise ModelError(
            f"{path} was written before checkpoints held their network's config, and its run's config.yaml "
            "is not beside it: put that file back in the run folder, or give the network yourself: "
            "ImageClassifier.load_from_checkpoint(path, net=MnistCNN(in_channels=1, num_classes=10))"
        )
    model = yaml.safe_load(config.read_text())["model"]
    net = model["net"] if isinstance(model["net"], dict) else {"class_path": model["net"]}
    module, _, name = net["class_path"].rpartition(".")
    takes = inspect.signature(getattr(importlib.import_module(module or "models"), name)).parameters
    linked = {key: card[key] for key in LINKED if key in takes and key in card}
    recipe = {"net": {**net, "init_args": {**linked, **(net.get("init_args") or {})}}}
    return {**recipe, **{key: model[key] for key in ("optimizer", "scheduler") if model.get(key)}}
