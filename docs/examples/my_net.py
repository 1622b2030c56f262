"""README, "Make it yours": the example network (the tests run this file)."""

from torch import nn


class MyNet(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, width: int = 64) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(width, num_classes),
        )

    def forward(self, x):
        return self.layers(x)
