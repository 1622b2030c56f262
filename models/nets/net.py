"""The base class of the networks that ``--model.net`` can name."""

import torch
from torch import nn


class Net(nn.Module):
    """A classification network: images in, logits out (no softmax).

    Subclasses take ``in_channels``, ``num_classes`` and ``image_size`` keyword
    arguments, which the CLI fills in from the DataModule. The base class exists so
    that ``--model.net ResNet`` resolves among our networks only: annotating with
    ``nn.Module`` would make the short name clash with ``torchvision.models.ResNet``.
    """


def flat_features(features: nn.Module, in_channels: int, image_size: int) -> int:
    """Number of values ``features`` yields per image, found with one dummy forward."""
    with torch.no_grad():
        return features(torch.zeros(1, in_channels, image_size, image_size)).numel()


def classifier(model: nn.Module) -> tuple[str, nn.Linear | nn.Conv2d]:
    """The classifier of ``model``, its name and module: the last linear or convolution layer (1x1 in
    SqueezeNet), the layer whose outputs are the classes."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))][-1]
