"""The example scripts' way: a torchvision data set with per-image transforms, a DataLoader with
worker processes and a DistributedSampler, DistributedDataParallel, loss all-reduced every step.

Run as one process (world size 1, as the example scripts run on one machine with one device). Prints one
JSON line: train seconds and samples per epoch, test accuracy.
"""

import math
import os

import torch
import torch.distributed as dist
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, Subset
from torchvision import transforms

from benchmarks.common import arguments, now, report
from data import FashionMNISTDataModule
from models import MnistCNN


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(42)
    device = torch.device(args.device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)

    dm = FashionMNISTDataModule(root=args.root)  # only for the files and the same train/val split
    dm.prepare_data()
    dm.setup("fit")
    per_image = transforms.Compose([transforms.ToTensor(), transforms.Normalize(dm.mean, dm.std)])
    train_set = Subset(dm.dataset_class(args.root, train=True, transform=per_image), dm.train_set.indices)
    test_set = dm.dataset_class(args.root, train=False, transform=per_image)
    sampler = DistributedSampler(train_set)
    loader_options = {
        "num_workers": args.workers,
        "pin_memory": device.type == "cuda",
        "persistent_workers": True,
    }
    train_loader = DataLoader(train_set, args.batch_size, sampler=sampler, **loader_options)

    net = DistributedDataParallel(MnistCNN().to(device))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-3)
    steps = args.epochs * math.ceil(len(train_set) / args.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps, eta_min=0.001)
    seconds = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        start = now(device)
        net.train()
        for x, y in train_loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(net(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            dist.all_reduce(
                loss.detach(), op=dist.ReduceOp.AVG if device.type == "cuda" else dist.ReduceOp.SUM
            )
        seconds.append(now(device) - start)
    net.eval()
    correct = 0
    with torch.no_grad():
        for x, y in DataLoader(test_set, 1000, **loader_options):
            correct += (net(x.to(device)).argmax(1) == y.to(device)).sum().item()
    dist.destroy_process_group()
    report(seconds, len(train_set), correct / len(test_set))


if __name__ == "__main__":
    main()
