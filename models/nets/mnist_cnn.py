"""The convolutional network of the example MNIST script."""

from torch import Tensor, nn

from models.nets.net import Net, flat_features


class MnistCNN(Net):
    """Three 5x5 convolutions (16, 32, 32 channels) and a 128-64 MLP head.

    At 28x28 the head's input is 800 features, as in the example script; other sizes adapt.
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 5, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2, stride=2, padding=1),
            nn.Conv2d(16, 32, 5, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2, stride=2, padding=1),
            nn.Conv2d(32, 32, 5, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.head = nn.Sequential(
            nn.Linear(flat_features(self.features, in_channels, image_size), 128),
            nn.ReLU(),
            nn.Linear(128, 64),
            nn.ReLU(),
            nn.Linear(64, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
