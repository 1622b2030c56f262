"""The networks: the example scripts' architectures, sizes taken from the data, BatchNorm where promised."""

import pytest
import torch
from torch import nn

from models import CifarCNN, FastCNN, MnistCNN, ResNet


def test_mnist_cnn_is_the_seed_network():
    net = MnistCNN()
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    assert [(c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (16, (5, 5), (1, 1)),
        (32, (5, 5), (1, 1)),
        (32, (5, 5), (1, 1)),
    ]
    assert [(lin.in_features, lin.out_features) for lin in linears] == [(800, 128), (128, 64), (64, 10)]
    assert sum(isinstance(m, nn.MaxPool2d) for m in net.modules()) == 2
    assert net(torch.randn(5, 1, 28, 28)).shape == (5, 10)


def test_cifar_cnn_is_the_seed_network():
    net = CifarCNN()
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    assert [(c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (32, (3, 3), (0, 0)),
        (64, (3, 3), (0, 0)),
        (64, (3, 3), (0, 0)),
    ]
    assert [(lin.in_features, lin.out_features) for lin in linears] == [(1024, 64), (64, 10)]
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize("net_class", [MnistCNN, CifarCNN, FastCNN, ResNet])
@pytest.mark.parametrize(("channels", "size", "classes"), [(1, 28, 10), (3, 32, 100), (3, 20, 3)])
def test_every_net_fits_every_data_shape(net_class, channels, size, classes):
    net = net_class(in_channels=channels, num_classes=classes, image_size=size)
    assert net(torch.randn(2, channels, size, size)).shape == (2, classes)


def test_fast_cnn_pools_after_every_batchnorm_convolution():
    net = FastCNN(width=16)
    kinds = [type(m).__name__ for m in net.features if not isinstance(m, nn.ReLU)]
    assert kinds == ["Conv2d", "BatchNorm2d", "MaxPool2d"] * 3 + ["Flatten"]
    assert [c.out_channels for c in net.modules() if isinstance(c, nn.Conv2d)] == [16, 32, 64]
    assert net.head[0].in_features == 64 * 3 * 3  # 28 -> 14 -> 7 -> 3
    assert FastCNN(in_channels=3, image_size=32, width=8).head[0].in_features == 32 * 4 * 4


@pytest.mark.parametrize(("depth", "blocks"), [(8, 3), (20, 9)])
def test_resnet_depth_and_batchnorm(depth, blocks):
    net = ResNet(depth=depth)
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3)]
    assert len(convs) + 1 == depth  # 3x3 convs plus the final linear layer
    assert sum(isinstance(m, nn.BatchNorm2d) for m in net.modules()) >= 2 * blocks + 1


def test_resnet_rejects_impossible_depth():
    with pytest.raises(ValueError, match="6n \\+ 2"):
        ResNet(depth=10)
