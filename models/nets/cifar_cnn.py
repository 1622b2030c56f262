"""The convolutional network of the example CIFAR-10 script."""

from torch import Tensor, nn

from models.nets.net import Net, flat_features


class CifarCNN(Net):
    """Three 3x3 convolutions (32, 64, 64 channels, no padding) and a 64-unit head.

    At 32x32 the head's input is 1024 features, as in the example script; other sizes adapt.
    """

    def __init__(self, in_channels: int = 3, num_classes: int = 10, image_size: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.head = nn.Sequential(
            nn.Linear(flat_features(self.features, in_channels, image_size), 64),
            nn.ReLU(),
            nn.Linear(64, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
