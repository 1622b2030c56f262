"""Networks and the LightningModule that trains them."""

import importlib
import pkgutil

from models.cifar_cnn import CifarCNN
from models.fast_cnn import FastCNN
from models.image_classifier import ImageClassifier
from models.mnist_cnn import MnistCNN
from models.net import Net
from models.resnet import ResNet

__all__ = ["CifarCNN", "FastCNN", "ImageClassifier", "MnistCNN", "Net", "ResNet"]

# Import every module here, so that a Net subclass in a new file is known to `--model.net` by its name.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
