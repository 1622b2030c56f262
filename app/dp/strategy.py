"""``--trainer.strategy dp``: torch's DataParallel, which Lightning 2.0 removed from the Trainer.

Like the example scripts' ``nn.DataParallel(model)``: one process; each ``forward`` call splits the
batch along dim 0 over the visible GPUs, runs a replica of the module on each part and gathers the
outputs on the first GPU. Unlike Lightning 1.x's strategy, ``training_step`` and friends run once,
on the whole batch, so the loss, torchmetrics and ``self.log`` behave exactly as on one device.
Steps must call the module (``self(x)``) for the work to be split.
"""

import logging
from typing import Any

import torch
from lightning.pytorch.strategies import ParallelStrategy
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import Tensor, nn


class _OwnForward(nn.Module):
    """Calls the class's ``forward`` of ``module``, not the instance's DataParallel shortcut."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return type(self.module).forward(self.module, *args, **kwargs)


# workaround: Lightning 2 removed its dp strategy; gone when Lightning ships one again
class DataParallelStrategy(ParallelStrategy):
    """One process driving every visible GPU with :class:`torch.nn.DataParallel`.

    The LightningModule itself stays unwrapped (its checkpoints have no ``module.`` prefixes
    and load under any strategy); only its ``forward`` goes through DataParallel.
    """

    strategy_name = "dp"

    @property
    def root_device(self) -> torch.device:
        assert self.parallel_devices, "the Trainer sets parallel_devices"
        return self.parallel_devices[0]

    @property
    def world_size(self) -> int:
        return 1  # one process takes each batch whole, so lr and images/s count it once

    @property
    def distributed_sampler_kwargs(self) -> None:
        return None  # one process reads every batch whole

    @property
    def _replicates(self) -> bool:
        return self.root_device.type == "cuda" and len(self.parallel_devices) > 1

    def check_flags(self, trainer: Any) -> None:
        """Refuse ``sync_batchnorm``; warn where DataParallel has one device only (the Trainer calls it
        once it is built, before any work)."""
        if getattr(trainer, "sync_batchnorm", False):
            raise MisconfigurationException(
                "`strategy='dp'` runs one process, so `sync_batchnorm=True` has nothing to sync with:"
                " drop sync_batchnorm, or use strategy ddp for synchronized BatchNorm."
            )
        if not self._replicates:
            # Lightning's console logger: one line, where a Python warning prints two.
            logging.getLogger("lightning.pytorch").warning(
                f"strategy 'dp' on {len(self.parallel_devices)} {self.root_device.type} device(s) runs as a"
                " single process on one device: DataParallel splits batches across several GPUs only."
            )

    def model_to_device(self) -> None:
        assert self.model is not None
        self.model.to(self.root_device)

    def setup(self, trainer: Any) -> None:
        super().setup(trainer)
        if self._replicates:
            replicated = nn.DataParallel(_OwnForward(self.lightning_module), device_ids=self.parallel_devices)
            # A plain attribute, not a submodule: the state_dict keeps its keys.
            self.lightning_module.__dict__["forward"] = replicated.__call__

    def teardown(self) -> None:
        if self.lightning_module is not None:
            self.lightning_module.__dict__.pop("forward", None)
        super().teardown()

    def reduce(self, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        return tensor  # one process: nothing to reduce

    def all_gather(self, tensor: Tensor, group: Any = None, sync_grads: bool = False) -> Tensor:
        return tensor

    def barrier(self, *args: Any, **kwargs: Any) -> None:
        pass

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        return obj

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        return decision
