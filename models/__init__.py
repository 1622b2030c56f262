"""Networks and the LightningModule that trains them."""

from models.cifar_cnn import CifarCNN
from models.image_classifier import ImageClassifier
from models.mnist_cnn import MnistCNN
from models.net import Net
from models.resnet import ResNet

__all__ = ["CifarCNN", "ImageClassifier", "MnistCNN", "Net", "ResNet"]
