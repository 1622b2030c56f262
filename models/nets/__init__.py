"""The networks ``--model.net`` can name by their class names; any other ``nn.Module`` by its import path."""

from models.nets.backbone import Backbone
from models.nets.cifar_cnn import CifarCNN
from models.nets.fast_cnn import FastCNN
from models.nets.mnist_cnn import MnistCNN
from models.nets.net import Net
from models.nets.resnet import ResNet

__all__ = ["Backbone", "CifarCNN", "FastCNN", "MnistCNN", "Net", "ResNet"]
