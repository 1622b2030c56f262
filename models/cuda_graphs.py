"""``--model.cuda_graphs``: the training step's network captured once and replayed (CUDA graphs), so
that the CPU launches one graph a step instead of each kernel."""

import torch
from lightning import Trainer
from torch import Tensor, nn

from models.errors import ModelError


def check(trainer: Trainer, compiled: bool) -> None:
    """Raise :class:`ModelError` where CUDA graphs cannot run this fit; before any training."""
    device = trainer.strategy.root_device
    if device.type != "cuda":
        raise ModelError(
            f"--model.cuda_graphs true needs a CUDA GPU (--trainer.accelerator gpu); this run is on "
            f"{device.type}: drop the flag"
        )
    if trainer.world_size > 1 or len(trainer.device_ids) > 1:
        raise ModelError(
            "--model.cuda_graphs true runs on one device; this run has "
            f"{max(trainer.world_size, len(trainer.device_ids))}: use --trainer.devices 1, or drop the flag"
        )
    if compiled:
        raise ModelError(
            "--model.cuda_graphs true compiles the training network itself: drop --model.compile"
        )


class GraphedNet:
    """The network compiled with ``mode="reduce-overhead"`` (torch's CUDA graphs) for full training
    batches; any other shape (an epoch's last, smaller batch) runs eagerly, so that one graph serves
    the whole run (static shapes, no recompilation). Evaluation keeps the eager network.

    Not an ``nn.Module``: the LightningModule holds it without its parameters appearing twice in
    checkpoints.

    Args:
        net: the network; its parameters are the graph's (updated in place by the optimizer).
    """

    def __init__(self, net: nn.Module) -> None:
        self.net, self.batch = net, 0
        self.compiled = torch.compile(net, mode="reduce-overhead", dynamic=False)

    def __call__(self, x: Tensor) -> Tensor:
        self.batch = self.batch or len(x)  # the first batch's size: the run's full batch
        if len(x) != self.batch:
            return self.net(x)
        # A new training step: the outputs of the previous replay may be overwritten.
        torch.compiler.cudagraph_mark_step_begin()
        return self.compiled(x)
