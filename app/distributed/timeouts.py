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
        self.pending: timedelta | None = None  # the timeout to set after the next training step

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        # Each run makes its process group anew, before this hook.
        seconds = getattr(trainer, "collective_timeout", None)
        distributed = dist.is_available() and dist.is_initialized()
        self.pending = timedelta(seconds=seconds) if seconds is not None and distributed else None

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.pending is None:
            return
        dist.set_timeout(self.pending)  # public from torch 2.14, pyproject's lower bound
        self.pending = None
