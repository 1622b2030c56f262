"""The limit: a hand-written PyTorch loop over tensors already in memory, same model and recipe.

``--net``, ``--precision`` and ``--channels-last`` name the template's ``--model.net``,
``--trainer.precision`` (``bf16-mixed``: bf16 autocast around the forward and the loss, as
Lightning's plugin does) and ``--model.channels_last``. Epochs are timed as the template's are
(:class:`EpochClock`: no wait for the device within an epoch). Prints one JSON line: train seconds
and samples per epoch, test accuracy. ``--profile FILE``: instead, a few steps under the profiler
(:class:`benchmarks.step_profile.StepWindow`), written to FILE. ``--cuda-graphs``: the network run
as the template's ``--model.cuda_graphs`` runs it (:class:`models.cuda_graphs.GraphedNet`), and what
``torch.compile`` did (frames compiled, graph breaks, CUDA-graph skips) in the JSON line.

The normalisation's constants are made once, before the loop. Each epoch's order is drawn on the CPU
and copied to the device inside the timed epoch, as the template's resident loader copies its own.
"""

import math
import sys

import torch
from torch.nn import functional as F

from benchmarks.common import EpochClock, arguments, report
from benchmarks.internals import compile_counters
from data import FashionMNISTDataModule
from data.batch_transforms import standardization, standardize
from models import FastCNN, MnistCNN
from models.cuda_graphs import GraphedNet

NETS = {"MnistCNN": MnistCNN, "FastCNN": FastCNN}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--net", choices=sorted(NETS), default="MnistCNN")
    parser.add_argument("--precision", choices=("32-true", "bf16-mixed"), default="32-true")
    parser.add_argument("--channels-last", action="store_true", help="the template's --model.channels_last")
    parser.add_argument("--cuda-graphs", action="store_true", help="the template's --model.cuda_graphs")
    parser.add_argument("--profile", metavar="FILE", help="profile a few steps into FILE, then stop")
    parser.add_argument("--profile-steps", type=int, nargs=2, default=(30, 20), metavar=("WARMUP", "STEPS"))
    parser.add_argument("--val-size", type=split_size, default=5000, help="the template's --data.val_size")
    args = parser.parse_args()
    torch.manual_seed(42)
    device = torch.device(args.device)

    # The same files and train/val split as the template.
    dm = FashionMNISTDataModule(root=args.root, val_size=args.val_size)
    dm.prepare_data()
    dm.setup("fit")
    dm.setup("test")
    train, test = (_tensors(split, device) for split in (dm.train_set, dm.test_set))
    scale, shift = standardization(*(torch.tensor(v, device=device) for v in (dm.mean, dm.std)))

    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    net = NETS[args.net]().to(device, memory_format=memory_format)
    forward = GraphedNet(net) if args.cuda_graphs else net

    def model_input(images: torch.Tensor) -> torch.Tensor:
        return standardize(images, scale, shift).contiguous(memory_format=memory_format)

    bf16 = torch.autocast(device.type, torch.bfloat16, enabled=args.precision == "bf16-mixed")
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-3)
    steps = args.epochs * math.ceil(len(train[0]) / args.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps, eta_min=0.001)
    seconds, clock = [], EpochClock(device)
    window = None
    if args.profile:
        from benchmarks.step_profile import StepWindow  # imports Lightning: only when asked

        window = StepWindow(device, args.profile, *args.profile_steps)
    for _ in range(args.epochs):
        clock.start()
        net.train()
        order = torch.tensor(torch.randperm(len(train[0])).tolist(), device=device)
        for batch in order.split(args.batch_size):
            if window is not None:
                window.step_start()
                if window.done:
                    return
            with bf16:
                loss = F.cross_entropy(forward(model_input(train[0][batch])), train[1][batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            clock.step_done()
        seconds.append(clock.seconds())
    if window is not None:
        sys.exit(window.abandon())
    net.eval()
    with torch.no_grad(), bf16:
        correct = sum(
            (net(model_input(x)).argmax(1) == y).sum().item()
            for x, y in zip(test[0].split(1000), test[1].split(1000), strict=True)
        )
    extra = {"compile": compile_counters()} if args.cuda_graphs else {}
    report(seconds, len(train[0]), correct / len(test[0]), **extra)


def split_size(text: str) -> int | float:
    """``--data.val_size``'s two forms: a count, or a fraction in (0, 1)."""
    value = float(text)
    return value if value < 1 else int(value)


def _tensors(split, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    indices = torch.as_tensor(split.indices)
    images = split.dataset.data[indices].unsqueeze(1).contiguous()
    return images.to(device), torch.as_tensor(split.dataset.targets)[indices].to(device)


if __name__ == "__main__":
    main()
