"""The limit: a hand-written PyTorch loop over tensors already in memory, same model and recipe.

Prints one JSON line: train seconds and samples per epoch, test accuracy.
"""

import math

import torch
from torch.nn import functional as F

from benchmarks.common import arguments, now, report
from data import FashionMNISTDataModule
from data.batch_transforms import normalize
from models import MnistCNN


def main() -> None:
    parser = arguments(__doc__)
    args = parser.parse_args()
    torch.manual_seed(42)
    device = torch.device(args.device)

    dm = FashionMNISTDataModule(root=args.root)  # the same files and train/val split as the template
    dm.prepare_data()
    dm.setup("fit")
    dm.setup("test")
    train, test = (_tensors(split, device) for split in (dm.train_set, dm.test_set))
    mean, std = (torch.tensor(v, device=device) for v in (dm.mean, dm.std))

    net = MnistCNN().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-3)
    steps = args.epochs * math.ceil(len(train[0]) / args.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps, eta_min=0.001)
    seconds = []
    for _ in range(args.epochs):
        start = now(device)
        net.train()
        for batch in torch.randperm(len(train[0]), device=device).split(args.batch_size):
            loss = F.cross_entropy(net(normalize(train[0][batch], mean, std)), train[1][batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
        seconds.append(now(device) - start)
    net.eval()
    with torch.no_grad():
        correct = sum(
            (net(normalize(x, mean, std)).argmax(1) == y).sum().item()
            for x, y in zip(test[0].split(1000), test[1].split(1000), strict=True)
        )
    report(seconds, len(train[0]), correct / len(test[0]))


def _tensors(split, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    indices = torch.as_tensor(split.indices)
    images = split.dataset.data[indices].unsqueeze(1).contiguous()
    return images.to(device), torch.as_tensor(split.dataset.targets)[indices].to(device)


if __name__ == "__main__":
    main()
