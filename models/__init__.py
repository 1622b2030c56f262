"""The networks (``nets/``) and the one LightningModule that trains them (``image_classifier.py``)."""

import importlib
import pkgutil

from models import nets
from models.errors import ModelError
from models.image_classifier import ImageClassifier, is_log_step
from models.nets import Backbone, CifarCNN, FastCNN, MnistCNN, Net, ResNet

__all__ = [
    "Backbone",
    "CifarCNN",
    "FastCNN",
    "ImageClassifier",
    "MnistCNN",
    "ModelError",
    "Net",
    "ResNet",
    "is_log_step",
]

# Every file in nets/, so that a Net subclass in a new file is known to `--model.net` by its name.
# Last, so that such a file can import what this package holds (`from models import Net`).
for _module in pkgutil.iter_modules(nets.__path__):
    importlib.import_module(f"{nets.__name__}.{_module.name}")
