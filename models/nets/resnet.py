"""A small CIFAR-style residual network with BatchNorm (He et al., 2016, section 4.2)."""

from jsonargparse.typing import PositiveInt
from torch import Tensor, nn

from models.nets.net import Net


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with an identity (or 1x1 projection) shortcut."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, stride, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
        )
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: Tensor) -> Tensor:
        return (self.body(x) + self.shortcut(x)).relu()


class ResNet(Net):
    """ResNet-``depth`` for small images: three stages of 16, 32, 64 channels.

    Args:
        depth: 6n + 2 layers (8, 14, 20, 32, 44, 56, 110).
        width: channels of the first stage; the next two double it.
    """

    def __init__(
        self,
        in_channels: int = 3,
        num_classes: int = 10,
        image_size: int = 32,
        depth: int = 20,
        width: PositiveInt = 16,
    ) -> None:
        super().__init__()
        if depth < 8 or (depth - 2) % 6:
            raise ValueError(f"ResNet depth must be 6n + 2 with n >= 1 (8, 14, 20, ...), got {depth}")
        blocks = (depth - 2) // 6
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
        ]
        channels = width
        for stage in range(3):
            out_channels = width * 2**stage
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(BasicBlock(channels, out_channels, stride))
                channels = out_channels
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(channels, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
