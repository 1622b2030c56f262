"""Random number generator states in checkpoints, one per rank, so a resumed run draws what an
uninterrupted one would (dropout, shuffles outside the data loader)."""

import random
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from lightning import Callback, LightningModule, Trainer

KEY = "rng_states"


def collect() -> dict[str, Any]:
    """This process's generator states."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    # Tensors and plain values only, so the checkpoint still loads with torch.load(weights_only=True).
    numpy = [kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, gauss]
    states = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": numpy}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore(states: dict[str, Any]) -> None:
    """Put back what :func:`collect` returned."""
    torch.set_rng_state(states["torch"])
    random.setstate(states["python"])
    kind, keys, position, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


class RNGStates(Callback):
    """Saves every rank's generator states with each checkpoint and restores them on resume.

    Lightning keeps the model, optimizer, scheduler, loops and loader state, but not these.
    They are put back when training starts, after everything set-up draws has drawn.
    """

    def __init__(self) -> None:
        self.pending: dict[str, Any] | None = None

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        states = [collect()]
        if dist.is_available() and dist.is_initialized() and trainer.world_size > 1:
            states = [None] * dist.get_world_size()
            dist.all_gather_object(states, collect())
        checkpoint[KEY] = states

    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        states = checkpoint.get(KEY)
        if states and len(states) == trainer.world_size:
            self.pending = states[trainer.global_rank]

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.pending is not None:
            restore(self.pending)
            self.pending = None
