"""A short collective timeout once training runs, a long one while a job starts."""

from datetime import timedelta
from typing import Any

import torch.distributed as dist
from lightning import Callback, LightningModule, Trainer


class CollectiveTimeout(Callback):
    """After the first training step, a rank waits ``--trainer.collective_timeout`` seconds for the others.

    Until then the process group keeps the timeout it was made with (Lightning's ddp and fsdp: 1800 s),
    which also bounds the start: every rank joining (Lightning starts rank 1 only once rank 0 runs;
    nodes start when their scheduler lets them) and the first step (compilation, cuDNN tuning).
    torchtitan separates the two timeouts the same way. Without this callback the long one stays.
    """

    def __init__(self) -> None:
        self.applied = False

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self.applied = False  # each run makes its process group anew

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        seconds = getattr(trainer, "collective_timeout", None)
        if self.applied or seconds is None or not (dist.is_available() and dist.is_initialized()):
            return
        # torch.distributed.set_timeout is public from torch 2.14 on; older releases have it private.
        set_timeout = getattr(dist, "set_timeout", None) or dist.distributed_c10d._set_pg_timeout
        set_timeout(timedelta(seconds=seconds))
        self.applied = True
