"""The networks (``nets/``) and the one LightningModule that trains them (``image_classifier.py``)."""

from models.errors import ModelError
from models.image_classifier import ImageClassifier
from models.loading import load
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
    "load",
]
