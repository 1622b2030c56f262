"""A small BatchNorm CNN tuned for time to accuracy on 28x28 and 32x32 images."""

from jsonargparse.typing import PositiveInt
from torch import Tensor, nn

from models.nets.net import Net, flat_features


def conv_bn_pool(in_channels: int, out_channels: int) -> list[nn.Module]:
    """3x3 convolution, BatchNorm, ReLU, then 2x2 max pooling (halves the size)."""
    return [
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    ]


class FastCNN(Net):
    """Three conv-BN-ReLU-pool stages (``width``, 2x, 4x channels) and a 128-unit head.

    Pooling after every convolution keeps the costly layers small: at width 16 a 28x28 image
    costs about 2 M multiply-adds, fewer than the example scripts' MnistCNN, and BatchNorm lets it train
    at a high learning rate (``configs/fashion_mnist_fast.yaml``).

    Args:
        width: channels of the first convolution.
    """

    def __init__(
        self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28, width: PositiveInt = 16
    ) -> None:
        super().__init__()
        self.features = nn.Sequential(
            *conv_bn_pool(in_channels, width),
            *conv_bn_pool(width, 2 * width),
            *conv_bn_pool(2 * width, 4 * width),
            nn.Flatten(),
        )
        self.head = nn.Sequential(
            nn.Linear(flat_features(self.features, in_channels, image_size), 128),
            nn.ReLU(inplace=True),
            nn.Linear(128, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
